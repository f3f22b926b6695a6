//! Issue 14's small traps, end to end: the editor and pagers an agent gets
//! and how it asks for an editor on purpose, and a user's history file that
//! never receives a line of shellkeep's.

use std::path::Path;

use serde_json::json;

use crate::{Reply, Server};

/// A wrapper that starts the server without the harness's `--no-rc` (its
/// first argument after the binary), so the shell reads the user's
/// `~/.bashrc` as it does for a real user.
const WITH_RC: &[&str] = &["bash", "-c", r#"b=$1; shift 2; exec "$b" "$@""#, "with-rc"];

/// A user's home: a `.bashrc` that appends to the history file at every
/// prompt (`PROMPT_COMMAND='history -a'`), with `histappend` and no
/// `HISTCONTROL` at all, and a history file of earlier work. `history_file`
/// is where the `.bashrc` points `HISTFILE` (relative to the home); the
/// `.bashrc` adds `extra` (time stamps, say).
fn home(dir: &Path, history_file: &str, extra: &str) {
    std::fs::create_dir_all(dir).expect("home");
    let rc = format!(
        "HISTFILE=\"$HOME/{history_file}\"\nHISTSIZE=1000\nHISTFILESIZE=2000\nunset HISTCONTROL \
         HISTIGNORE\nshopt -s histappend\nPROMPT_COMMAND='history -a'\n{extra}\n"
    );
    std::fs::write(dir.join(".bashrc"), rc).expect(".bashrc");
    let history = dir.join(history_file);
    std::fs::create_dir_all(history.parent().expect("a directory")).expect("mkdir");
    std::fs::write(history, "echo earlier work\ngit status\n").expect("history");
}

/// Runs `command` in the terminal and checks that it completed with `code`.
async fn ok(server: &Server, command: &str, code: i64) -> Reply {
    let r = server.terminal(json!({"command": command, "timeout": 20})).await;
    assert_eq!(
        (r["status"].as_str(), r["exit_code"].as_i64()),
        (Some("completed"), Some(code)),
        "{command}: {r:#?}"
    );
    r
}

/// Issue 14: after a nested `bash` and `exit`, the line that reinstalls the
/// integration (`{ __sk_nonce=…; . '…/reinstall-2.sh'; }`) landed in
/// `~/.bash_history`. A day's work (plain commands, nested shells, `exec
/// bash`, a login shell, `HISTCONTROL` unset, a reset) leaves the history
/// file with the user's own lines and nothing of shellkeep's.
#[tokio::test]
async fn nothing_of_shellkeeps_reaches_the_history_file() {
    for (history_file, extra) in
        [(".bash_history", ""), ("custom/history", "HISTTIMEFORMAT='%F %T '")]
    {
        let base = std::env::temp_dir().join(format!(
            "sk-hist-{}-{}",
            std::process::id(),
            history_file.len()
        ));
        let _ = std::fs::remove_dir_all(&base);
        let home_dir = base.join("home");
        home(&home_dir, history_file, extra);
        let home_str = home_dir.to_str().expect("utf-8");
        let server = Server::wrapped(WITH_RC, &[], &[("HOME", home_str)]).await;
        let history = home_dir.join(history_file);

        let r = ok(&server, "echo \"$HISTFILE\"; echo plain", 0).await;
        assert_eq!(r.output(), format!("{}\nplain\n", history.display()), "{r:#?}");
        // A line the user puts in history on purpose gets there.
        ok(&server, "history -s 'echo kept on purpose'", 0).await;
        ok(&server, "cd /tmp && ls >/dev/null", 0).await;
        ok(&server, "unset HISTCONTROL HISTIGNORE", 0).await;
        ok(&server, "echo after unset", 0).await;
        // A nested shell reads the same `.bashrc`.
        let r = ok(&server, "bash", 0).await;
        assert!(r.text.contains("nested shell started"), "{}", r.text);
        ok(&server, "echo inner; unset HISTCONTROL", 0).await;
        ok(&server, "echo inner again", 0).await;
        ok(&server, "exit", 0).await;
        // One level deeper and back, then `exec bash` and a login shell.
        ok(&server, "bash", 0).await;
        ok(&server, "bash", 0).await;
        ok(&server, "exit 3", 3).await;
        ok(&server, "exit 0", 0).await;
        let r = ok(&server, "exec bash", 0).await;
        assert!(r.text.contains("reinstalled"), "{}", r.text);
        ok(&server, "echo after exec", 0).await;
        ok(&server, "bash -l", 0).await;
        ok(&server, "echo in a login shell", 0).await;
        ok(&server, "exit", 0).await;
        // A shell on a terminal of its own, and (as root, where it asks
        // no password) `su` keeping the environment, home included.
        // `script` runs its command through `$SHELL -c`: with bash, that
        // bash replaces itself; with `sh` (dash, and `script`'s choice
        // where `SHELL` is unset, as under a service manager or CI), a
        // dash stays between `script` and the bash.
        for typed in ["script -qc bash /dev/null", "SHELL=/bin/sh script -qc bash /dev/null"] {
            let r = ok(&server, typed, 0).await;
            assert!(r.text.contains("nested shell started"), "{typed}: {}", r.text);
            ok(&server, "echo in script", 0).await;
            ok(&server, "exit", 0).await;
        }
        if ok(&server, "id -u", 0).await.output() == "0\n" {
            ok(&server, "su -p", 0).await;
            ok(&server, "echo in su", 0).await;
            ok(&server, "exit", 0).await;
        }
        // The shell's own list holds nothing of ours either.
        ok(&server, "bash", 0).await;
        let r = ok(&server, "unset HISTCONTROL; echo x; history", 0).await;
        assert!(!r.output().contains("__sk"), "{r:#?}");
        ok(&server, "exit", 0).await;
        ok(&server, "history -a", 0).await;
        let r =
            server.terminal(json!({"command": "echo reset", "reset": true, "timeout": 20})).await;
        assert_eq!(r.output(), "reset\n", "{r:#?}");
        ok(&server, "bash", 0).await;
        ok(&server, "exit", 0).await;
        drop(server);

        let text = std::fs::read_to_string(&history).expect("the history file");
        // Time stamps are `#` lines of their own.
        let lines: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
        assert_eq!(lines, ["echo earlier work", "git status", "echo kept on purpose"], "{text}");
        assert_eq!(text.contains("\n#"), !extra.is_empty(), "{text}");
        // Shells that did not read the `.bashrc` (the login shell) keep
        // bash's default file: nothing of ours there either.
        if let Ok(text) = std::fs::read_to_string(home_dir.join(".bash_history")) {
            assert!(!text.contains("__sk") && !text.contains("eval --"), "{text}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// Sends `keys` to vim and returns the reply.
async fn keys(server: &Server, keys: &[&str]) -> Reply {
    server.terminal(json!({"keys": keys, "timeout": 10})).await
}

/// Writes `message` in the vim that shows `file`'s screen, then `:wq`;
/// returns the reply for the command that ran vim, once it has ended.
async fn write_in_vim(server: &Server, message: &str) -> Reply {
    let r = keys(server, &["i", message, "ENTER"]).await;
    assert_eq!(r["exit_code"], -1, "vim still runs: {r:#?}");
    keys(server, &["ESC"]).await;
    keys(server, &[":wq", "ENTER"]).await
}

/// Issue 14: `GIT_EDITOR=true` was set but said nowhere, so `git commit`
/// without `-m` just aborted. The non-interactive environment is what the
/// README and the tool's description say, and an agent that asks for an
/// editor gets one: `git -c core.editor=vim`, `GIT_EDITOR=vim`, `vim file`.
#[tokio::test]
async fn editors_and_pagers_are_off_unless_asked_for() {
    let server = Server::start().await;
    let r = ok(&server, "echo $PAGER ${GIT_PAGER-unset} ${MANPAGER-unset} $PIP_NO_INPUT $DEBIAN_FRONTEND; git var GIT_EDITOR; git var GIT_PAGER; echo ${GIT_EDITOR-unset}", 0).await;
    assert_eq!(r.output(), "cat unset unset 1 noninteractive\ntrue\ncat\nunset\n", "{r:#?}");
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let terminal = tools.iter().find(|t| t.name == "terminal").expect("terminal");
    let description = terminal.description.as_deref().unwrap_or_default();
    for said in ["PAGER=cat", "core.pager=cat", "core.editor", "GIT_EDITOR=vim"] {
        assert!(description.contains(said), "{said} not in {description}");
    }

    ok(&server, "git init -q repo && cd repo && git config user.email a@b.c && git config user.name A && git config core.editor vim", 0).await;
    // A repository's own editor does not open by surprise: the commit
    // aborts for its empty message, as documented.
    let r = server.terminal(json!({"command": "git commit --allow-empty", "timeout": 20})).await;
    assert_eq!(
        (r["status"].as_str(), r["exit_code"].as_i64()),
        (Some("completed"), Some(1)),
        "{r:#?}"
    );
    assert!(r.output().contains("Aborting commit due to empty commit message"), "{r:#?}");
    // `git rebase -i` keeps its list.
    ok(&server, "git commit -q --allow-empty -m one && git commit -q --allow-empty -m two", 0)
        .await;
    let r = ok(&server, "git rebase -q -i --keep-empty HEAD~1 && git log --format=%s", 0).await;
    assert_eq!(r.output(), "two\none\n", "{r:#?}");

    if !crate::installed("vim") {
        return;
    }
    for (how, message) in [
        ("git -c core.editor=vim commit --allow-empty", "chosen with -c"),
        ("GIT_EDITOR=vim git commit --allow-empty", "chosen with GIT_EDITOR"),
    ] {
        let r = server.terminal(json!({"command": how, "timeout": 10})).await;
        assert_eq!(r["waiting_for_input"], true, "{how}: {r:#?}");
        assert!(r.output().contains("COMMIT_EDITMSG"), "{how}: vim shows the message file: {r:#?}");
        let r = write_in_vim(&server, message).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(0)),
            "{how}: {r:#?}"
        );
        let r = ok(&server, "git log -1 --format=%s", 0).await;
        assert_eq!(r.output(), format!("{message}\n"), "{how}");
    }
    // An editor of the agent's own on a file.
    let r =
        server.terminal(json!({"command": "EDITOR=vim; $EDITOR notes.txt", "timeout": 10})).await;
    assert_eq!(r["waiting_for_input"], true, "{r:#?}");
    assert!(r.output().contains("notes.txt"), "{r:#?}");
    let r = write_in_vim(&server, "written in vim").await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    // The Enter after the message made a second line.
    let r = ok(&server, "cat notes.txt", 0).await;
    assert_eq!(r.output(), "written in vim\n\n", "{r:#?}");
}
