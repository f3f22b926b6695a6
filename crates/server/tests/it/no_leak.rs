//! Issue 13, "Done when": with three secrets in the server's environment
//! (two found by their names, one named with `--secret`), a secrets file
//! and an unregistered GitHub-shaped token, a real client runs what leaks
//! secrets in practice (`env`, `cat .env`, a split `printf`, a full-screen
//! view, a progress line redrawn over a token, `run` on stderr, a
//! background job, 5 MB with a token in the middle, `set -x`, `git remote
//! -v` on a token URL). No raw value and no encoding of one (base64 at the
//! three alignments, URL-encoding, JSON escaping) is in any reply, text or
//! structured, any notification, any file under the output, runtime and
//! audit directories, or the server's stderr (at debug level); the secret
//! still works in commands, and the audit log ends every command.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Server, poll_until, random_u64, wait_until};

/// Standard base64 of `bytes`, with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
        out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
    }
    out
}

/// What must never be seen of `value`: the value, its base64 at each of
/// the three byte alignments (the characters that do not depend on what
/// surrounds it), its URL-encoding and its JSON escaping.
fn needles(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut found = vec![value.to_owned()];
    for skip in 0..3 {
        let aligned = &bytes[skip..];
        let whole = &aligned[..aligned.len() / 3 * 3];
        found.push(base64(whole));
    }
    let url: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    found.push(url);
    let json = serde_json::to_string(value).expect("a string serializes");
    found.push(json.trim_matches('"').to_owned());
    found.sort();
    found.dedup();
    found
}

/// Every regular file under `dir`, with its bytes.
pub(crate) fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(bytes) = std::fs::read(entry.path())
            {
                found.push((entry.path(), bytes));
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// A reply as everything the client received: its text and its structured
/// content as JSON.
fn received(reply: &Reply) -> String {
    format!("{}\n{}", reply.text, reply.structured)
}

/// The `output` call a cut reply names for the lines it left out.
fn left_out_call(reply: &Reply) -> Value {
    let marker = "[Read the lines left out with the output tool: ";
    let start = reply.text.find(marker).unwrap_or_else(|| panic!("{}", reply.text)) + marker.len();
    let end = start + reply.text[start..].find('}').expect("the call ends") + 1;
    serde_json::from_str(&reply.text[start..end]).expect("the call is JSON")
}

/// A terminal call whose reply is kept for the search.
async fn keep(server: &Server, replies: &mut Vec<Reply>, args: Value) -> Reply {
    let r = server.terminal(args).await;
    replies.push(r.clone());
    r
}

#[tokio::test]
async fn no_secret_leaks_anywhere_a_client_or_a_file_could_see_it() {
    let tag = format!("{:08x}", random_u64() as u32);
    let openai = format!("sk-proj-{tag}Op3nAiKeyValue0123456789abcd");
    let github = format!("ghp_{tag}abcdefghijABCDEFGHIJ01234567");
    let named = format!("named/{tag}+Secret=value");
    let from_file = format!("file-{tag}-secret-value");
    let unregistered = format!("ghp_Zy{tag}KLMNOPQRSTklmnopqrst987654");
    assert_eq!((github.len(), unregistered.len()), (40, 40));
    let secrets = [&openai, &github, &named, &from_file, &unregistered];

    let dir = std::env::temp_dir().join(format!("sk-leak-{tag}"));
    std::fs::create_dir(&dir).expect("mkdir");
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(dir.clone());
    let tmp = dir.join("tmp");
    let audit_dir = dir.join("audit");
    for d in [&tmp, &audit_dir] {
        std::fs::create_dir(d).expect("mkdir");
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let secrets_file = dir.join("secrets.env");
    std::fs::write(&secrets_file, format!("SK_FILE_SECRET={from_file}\n")).expect("write");
    std::fs::set_permissions(&secrets_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let audit_log = audit_dir.join("audit.jsonl");
    let server = Server::with_env(
        &[
            "--secret",
            "SK_E2E_NAMED",
            "--secrets-file",
            secrets_file.to_str().expect("utf-8"),
            "--audit-log",
            audit_log.to_str().expect("utf-8"),
        ],
        &[
            ("OPENAI_API_KEY", &openai),
            ("GITHUB_TOKEN", &github),
            ("SK_E2E_NAMED", &named),
            ("SHELLKEEP_LOG", "debug"),
            ("TMPDIR", tmp.to_str().expect("utf-8")),
            ("XDG_RUNTIME_DIR", ""),
        ],
    )
    .await;
    // Files of the user's own that hold the values (positive controls).
    let cwd = server.cwd().to_owned();
    let dotenv = format!(
        "OPENAI_API_KEY={openai}\nGITHUB_TOKEN={github}\nSK_E2E_NAMED={named}\n\
         SK_FILE_SECRET={from_file}\nOTHER={unregistered}\n"
    );
    std::fs::write(cwd.join(".env"), &dotenv).expect("write .env");
    std::fs::write(cwd.join("token-file"), &github).expect("write the token file");

    let mut replies: Vec<Reply> = Vec::new();
    // Protocol errors, as the client saw them.
    let mut errors: Vec<String> = Vec::new();

    // The environment, a file holding the values, and the secret at work.
    let r = keep(&server, &mut replies, json!({"command": "env"})).await;
    for name in ["OPENAI_API_KEY", "GITHUB_TOKEN", "SK_E2E_NAMED", "SK_FILE_SECRET"] {
        assert!(r.output().contains(&format!("{name}=<secret-hidden>")), "{name}: {r:#?}");
    }
    let r = keep(&server, &mut replies, json!({"command": "cat .env"})).await;
    assert!(r.output().contains("OTHER=<secret-hidden>"), "{r:#?}");
    let r = keep(&server, &mut replies, json!({"command":
        "[ \"$GITHUB_TOKEN\" = \"$(cat token-file)\" ] && echo same; echo ${#GITHUB_TOKEN} ${#SK_E2E_NAMED} ${#SK_FILE_SECRET}"}))
    .await;
    assert_eq!(
        r.output(),
        format!("same\n{} {} {}\n", github.len(), named.len(), from_file.len()),
        "{r:#?}"
    );
    // Printed in pieces with a pause; encoded.
    let r = keep(&server, &mut replies, json!({"command":
        r#"printf '%s' "${SK_E2E_NAMED:0:7}"; sleep 0.3; printf '%s\n' "${SK_E2E_NAMED:7}"; printf '%s' "$SK_FILE_SECRET" | base64; printf '{"k":"%s"}\n' "$SK_E2E_NAMED"; printf '%s\n' "$SK_E2E_NAMED" | sed 's,/,%2F,; s,+,%2B,; s,=,%3D,'"#}))
    .await;
    assert_eq!(r.output().matches("<secret-hidden>").count(), 4, "{r:#?}");
    // A full-screen view of the file.
    let on_path = |program: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
    };
    let viewer = ["vim", "less"].into_iter().find(|p| on_path(p));
    if viewer.is_none() {
        crate::skipping("neither `vim` nor `less` is installed");
    }
    if let Some(viewer) = viewer {
        let command = format!("{viewer} .env");
        let r = keep(&server, &mut replies, json!({"command": command, "timeout": 3})).await;
        assert!(r.output().contains("OTHER=<secret-hidden>"), "{r:#?}");
        let quit = if viewer == "vim" { ":q!" } else { "q" };
        let keys = json!({"command": quit, "is_input": true, "timeout": 10});
        let r = keep(&server, &mut replies, keys).await;
        assert_eq!(r["status"], "completed", "{r:#?}");
    } else {
        eprintln!("the full-screen view is not tested: neither vim nor less is installed");
    }
    // A progress line redrawn over a token, and a call long enough to get
    // progress notifications.
    let r = keep(&server, &mut replies, json!({"command":
        r#"printf 'fetch %s' "${GITHUB_TOKEN:0:12}"; sleep 0.2; printf '\rfetch %s 50%%' "$GITHUB_TOKEN"; sleep 0.2; printf '\rfetch %s 100%%\n' "$GITHUB_TOKEN"; echo "wait $OPENAI_API_KEY"; sleep 2.5; echo done"#,
        "timeout": 30}))
    .await;
    assert!(r.output().contains("fetch <secret-hidden> 100%"), "{r:#?}");
    // set -x around a curl-like command; a token URL as a git remote.
    let r = keep(
        &server,
        &mut replies,
        json!({"command":
        "set -x; echo \"Authorization: Bearer $GITHUB_TOKEN\" >/dev/null; set +x"}),
    )
    .await;
    assert!(r.output().contains("Bearer <secret-hidden>"), "{r:#?}");
    let r = keep(&server, &mut replies, json!({"command": format!(
        "git init -q repo && git -C repo remote add origin https://user:{unregistered}@example.com/x.git && git -C repo remote -v"
    )}))
    .await;
    assert!(r.output().contains("origin"), "{r:#?}");
    // 5 MB with a secret in the middle, read back in pages.
    let r = keep(&server, &mut replies, json!({"command":
        "yes 'line of filler text.' | head -c 2500000; echo \"mid $SK_E2E_NAMED\"; yes 'line of filler text.' | head -c 2500000",
        "timeout": 120}))
    .await;
    assert_eq!(r["truncated"], true, "{}", r.text);
    let mut page_call = left_out_call(&r);
    // 21-byte lines: the token's line is the 119,048th.
    page_call["offset"] = json!(2_500_000 / 21 - 10);
    page_call["limit"] = json!(20);
    let page = server.call("output", page_call).await;
    assert!(page["lines"].as_str().is_some_and(|l| l.contains("mid <secret-hidden>")), "{page:#?}");
    replies.push(page);
    // A background job, a run on stderr, a session closed with a secret in
    // its last lines, the listing.
    let r = keep(&server, &mut replies, json!({"command": format!("sleep 0.2; echo \"bg $OPENAI_API_KEY\" # {unregistered}"), "background": true, "session": "bg"}))
    .await;
    assert!(!r.is_error, "{r:#?}");
    let job = poll_until(
        EVENTUALLY,
        async || server.call("output", json!({"session": "bg", "offset": 0})).await,
        |page| received(page).contains("bg <secret-hidden>"),
    )
    .await;
    replies.push(job);
    assert!(
        replies.iter().any(|r| received(r).contains("# <secret-hidden>")),
        "the job's command is named masked"
    );
    let r = server
        .run(json!({"command": "echo \"run $SK_FILE_SECRET\"; echo \"err $GITHUB_TOKEN\" >&2; printf %s \"$GITHUB_TOKEN\" | base64 >&2"}))
        .await;
    assert!(r.text.contains("err <secret-hidden>"), "{}", r.text);
    replies.push(r);
    // A run's stream read back with `output`.
    let r = server
        .run(json!({"command": "seq 1 100000 >&2; echo \"tail $GITHUB_TOKEN\" >&2; echo \"$SK_E2E_NAMED\" | base64 -w0 >&2"}))
        .await;
    let mut page_call = r["stderrOutputCall"].clone();
    assert!(page_call.is_object(), "the reply was cut: {r:#?}");
    replies.push(r);
    page_call["offset"] = json!(99_995);
    let page = server.call("output", page_call).await;
    assert!(received(&page).contains("tail <secret-hidden>"), "{page:#?}");
    replies.push(page);
    // A value typed into a command is echoed back masked, and matches; the
    // command file the shell read it from no longer holds it (the search
    // of the runtime directory below).
    let r = keep(
        &server,
        &mut replies,
        json!({"command": format!(
            "[ \"$SK_FILE_SECRET\" = '{from_file}' ] && echo typed-same"
        )}),
    )
    .await;
    assert_eq!(r.output(), "typed-same\n", "{r:#?}");
    // The policy's explanation of a command names it masked.
    let r = server
        .call("policy_explain", json!({"command": format!("curl -u 'x:{from_file}' https://user:{unregistered}@example.com")}))
        .await;
    assert!(received(&r).contains("https://user:<secret-hidden>@example.com"), "{r:#?}");
    replies.push(r);
    // Errors that name what the agent sent.
    let missing = format!("/nonexistent/{unregistered}");
    let r = server.terminal(json!({"command": "pwd", "cwd": missing, "session": "lost"})).await;
    assert!(r.is_error && r.text.contains("/nonexistent/<secret-hidden>"), "{r:#?}");
    replies.push(r);
    let r = server.run(json!({"command": "pwd", "cwd": missing})).await;
    replies.push(r);
    // Arguments that do not fit, worded back to the agent.
    for args in [
        json!({"command": "pwd", "timeout": unregistered}),
        json!({"command": "pwd", "session": unregistered}),
    ] {
        match server.try_call("terminal", args).await {
            Ok(r) => {
                assert!(r.is_error && r.text.contains("<secret-hidden>"), "{r:#?}");
                replies.push(r);
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    // An unknown argument is named in a note of the reply, masked: here its
    // name is the secret.
    let mut args = json!({"command": "pwd"});
    args[&unregistered] = json!(1);
    let r = server.terminal(args).await;
    assert!(!r.is_error, "{r:#?}");
    let note = "[Ignored the unknown argument `<secret-hidden>`: terminal takes";
    assert!(r.text.contains(note) && r["notes"][0].as_str().is_some_and(|n| n.starts_with(note)));
    replies.push(r);
    // Still running when listed and closed: the listing shows its command
    // and the close its last lines.
    let command = format!(
        "sleep 1.5; echo \"last $SK_E2E_NAMED {unregistered}\"; touch printed; sleep 30 # $GITHUB_TOKEN"
    );
    let running = keep(
        &server,
        &mut replies,
        json!({"command": command, "session": "closing", "timeout": 1}),
    )
    .await;
    assert_eq!(running["status"], "running", "{running:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(received(&listing).contains("<secret-hidden>"), "{listing:#?}");
    replies.push(listing);
    wait_until(EVENTUALLY, || cwd.join("printed").exists(), || "the last line".to_owned()).await;
    // The file exists once the line is written to the terminal, which the
    // server may not have read yet on a busy machine: wait for its log.
    let logged = poll_until(
        EVENTUALLY,
        async || server.call("output", json!({"session": "closing", "offset": -1})).await,
        |page| page["lines"].as_str().is_some_and(|l| l.starts_with("last ")),
    )
    .await;
    replies.push(logged);
    let closed = server.call("session_close", json!({"session": "closing"})).await;
    assert!(
        closed["command"].as_str().is_some_and(|c| c.contains("<secret-hidden>")),
        "{closed:#?}"
    );
    assert!(received(&closed).contains("last <secret-hidden> <secret-hidden>"), "{closed:#?}");
    replies.push(closed);

    // The audit log: a start and an end line, with an outcome, for every
    // command; the commands masked.
    let audit = || -> Vec<Value> {
        std::fs::read_to_string(&audit_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    };
    wait_until(
        EVENTUALLY,
        || {
            let lines = audit();
            lines.iter().filter(|l| l["event"] == "start").all(|s| {
                lines
                    .iter()
                    .any(|e| e["event"] == "end" && e["id"] == s["id"] && e["status"].is_string())
            })
        },
        || format!("an end line with a status for every start line: {:#?}", audit()),
    )
    .await;
    let lines = audit();
    let commands: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "start")
        .filter_map(|l| l["command"].as_str())
        .collect();
    for expected in [
        "env",
        "cat .env",
        "vim .env",
        "set -x; echo \"Authorization: Bearer $GITHUB_TOKEN\" >/dev/null; set +x",
    ] {
        if expected != "vim .env" || viewer == Some("vim") {
            assert!(commands.contains(&expected), "{expected}: {commands:#?}");
        }
    }
    assert!(
        commands.iter().any(|c| c.contains("https://user:<secret-hidden>@example.com")),
        "{commands:#?}"
    );

    // Nothing anywhere.
    let mut leaks = Vec::new();
    let notifications = server.notifications.all();
    assert!(!notifications.is_empty(), "the long call sent progress");
    assert!(
        notifications.iter().any(|n| n.to_string().contains("<secret-hidden>")),
        "{notifications:#?}"
    );
    let state = cwd.join(".sk");
    let mut files = files_under(&state);
    files.extend(files_under(&tmp));
    files.extend(files_under(&audit_dir));
    assert!(files.iter().any(|(p, _)| p == &cwd.join(".sk/server.log")), "stderr is searched");
    // At debug level the log names every request with its arguments: the
    // command with the token URL is there, masked.
    assert!(server.log().contains("https://user:<secret-hidden>@example.com"), "{}", server.log());
    assert!(files.iter().any(|(p, _)| p == &audit_log), "the audit log is searched");
    assert!(
        files.iter().any(|(_, bytes)| contains(bytes, "mid <secret-hidden>")),
        "the full outputs are searched"
    );
    for secret in secrets {
        for needle in needles(secret) {
            for (i, reply) in replies.iter().enumerate() {
                if received(reply).contains(&needle) {
                    leaks.push(format!("reply {i}: {needle}: {}", received(reply)));
                }
            }
            for e in &errors {
                if e.contains(&needle) {
                    leaks.push(format!("protocol error {e}: {needle}"));
                }
            }
            for n in &notifications {
                if n.to_string().contains(&needle) {
                    leaks.push(format!("notification {n}: {needle}"));
                }
            }
            for (path, bytes) in &files {
                if contains(bytes, &needle) {
                    leaks.push(format!("{}: {needle}", path.display()));
                }
            }
        }
    }
    assert!(leaks.is_empty(), "leaks:\n{}", leaks.join("\n"));
    // The searches find the values where they legitimately are: the
    // user's own files and the repository's configuration.
    let own = files_under(&cwd);
    for secret in secrets {
        assert!(own.iter().any(|(p, b)| p.ends_with(".env") && contains(b, secret)), "{secret}");
    }
    assert!(own.iter().any(|(p, b)| p.ends_with("repo/.git/config") && contains(b, &unregistered)));
    assert!(needles(&named).iter().any(|n| n.contains("%2F")), "the URL-encoding differs");
}
