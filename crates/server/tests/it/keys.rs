//! Keys through the real server (issue 18): `keys` sends named keys and
//! text, in order and with no Enter, to a real curses program, to vim and
//! to a shell's raw `read`; input text is text (pdb's `up`), with a note
//! when it is exactly a key's name; keys at the prompt are not sent; names
//! that look like keys but are none, lists past their bounds and `keys`
//! with a command are errors that say what to send; `command` may be left
//! out.

use std::path::Path;

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Server, installed, poll_until, wait_until};

/// The lines of `file`, once it holds at least `count` of them.
async fn lines_of(file: &Path, count: usize) -> Vec<String> {
    let read = || std::fs::read_to_string(file).unwrap_or_default();
    wait_until(EVENTUALLY, || read().lines().count() >= count, &read).await;
    read().lines().map(str::to_owned).collect()
}

/// Sends `keys` to the running program of session `default`.
async fn keys(server: &Server, keys: &[&str]) -> Reply {
    server.terminal(json!({"keys": keys, "timeout": 10})).await
}

/// The reply that reports the running command's end: `r` or a later poll.
async fn ended(server: &Server, r: Reply) -> Reply {
    if r["exit_code"] != -1 {
        return r;
    }
    poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"timeout": 5})).await,
        |r| r["exit_code"] != -1,
    )
    .await
}

/// Polls until the output since `r` (included) holds `text`: the last
/// reply, and the output since `r`.
async fn until_shown(server: &Server, r: Reply, text: &str) -> (Reply, String) {
    let mut seen = r.output().to_owned();
    if seen.contains(text) {
        return (r, seen);
    }
    let (_, r) = poll_until(
        EVENTUALLY,
        async || {
            let r = server.terminal(json!({})).await;
            seen.push_str(r.output());
            (seen.contains(text), r)
        },
        |(shown, r)| *shown || r["exit_code"] != -1,
    )
    .await;
    (r, seen)
}

/// A curses program (`keypad(True)`: application cursor-key mode) that
/// writes the name of every key code it gets to the file its argument
/// names, until `q` (the engine's key tests run it too).
const CURSES_PY: &str = include_str!("../../../engine/tests/data/curses_keys.py");

/// Issue 18 (M2, m2): keys reach a curses program as one key code each,
/// text in a list as its letters, a single `q` alone; the reply names what
/// was sent in its text and in `key_sent`, `command` left out or empty,
/// with `is_input` or without.
#[tokio::test]
async fn keys_reach_a_curses_program_as_xterm_sends_them() {
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    std::fs::write(server.cwd().join("menu.py"), CURSES_PY).expect("write the program");
    let r = server.terminal(json!({"command": "python3 menu.py keys.log", "timeout": 5})).await;
    until_shown(&server, r, "ready for keys").await;
    let log = server.cwd().join("keys.log");

    let r = server.terminal(json!({"keys": ["DOWN", "END", "F5", "hi"], "timeout": 10})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(lines_of(&log, 5).await, ["KEY_DOWN", "KEY_END", "KEY_F(5)", "h", "i"]);
    assert_eq!(r["key_sent"], "DOWN END F5 text(2)", "{r:#?}");
    assert!(r.text.contains(" Sent: DOWN END F5 text(2). "), "{}", r.text);

    let more = [
        json!({"keys": ["LEFT"], "command": "", "timeout": 10}),
        json!({"keys": ["RIGHT"], "is_input": true, "timeout": 10}),
        json!({"keys": ["HOME", "UP"], "is_input": false, "timeout": 10}),
    ];
    for args in more {
        let r = server.terminal(args.clone()).await;
        assert!(!r.is_error, "{args}: {r:#?}");
    }
    let codes = ["KEY_LEFT", "KEY_RIGHT", "KEY_HOME", "KEY_UP"];
    assert_eq!(lines_of(&log, 9).await[5..], codes);

    let r = ended(&server, keys(&server, &["q"]).await).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
    // One `q` and nothing after it: no Enter reached the program.
    assert_eq!(lines_of(&log, 10).await.len(), 10);
    assert_eq!(lines_of(&log, 10).await[9], "q");
}

/// The example of the tool's description: `ESC`, `:wq`, `ENTER` in one call
/// leave vim's insert mode and write the file.
#[tokio::test]
async fn one_call_of_keys_edits_and_leaves_vim() {
    if !installed("vim") {
        return;
    }
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "vim -u NONE notes.txt", "timeout": 5})).await;
    assert_eq!(r["exit_code"], -1, "{r:#?}");
    let r = keys(&server, &["i", "first line", "ENTER", "second", "ESC", ":wq", "ENTER"]).await;
    let r = ended(&server, r).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let written = std::fs::read_to_string(server.cwd().join("notes.txt")).expect("written");
    assert_eq!(written, "first line\nsecond\n");
}

/// The cursor keys follow the mode the program set: a shell's raw `read`
/// gets `ESC [ A` in normal mode and `ESC O A` in application mode.
#[tokio::test]
async fn arrows_follow_the_cursor_key_mode_through_the_server() {
    let server = Server::start().await;
    let reader = "for m in l h; do printf \"\\e[?1$m\"; echo \"mode $m set\"; IFS= read -rsn3 k; \
                  printf '%q\\n' \"$k\"; done; printf '\\e[?1l'";
    let r = server.terminal(json!({"command": reader, "timeout": 5})).await;
    until_shown(&server, r, "mode l set").await;
    let (_, seen) = until_shown(&server, keys(&server, &["UP"]).await, "mode h set").await;
    assert!(seen.contains("$'\\E[A'\nmode h set"), "{seen}");
    let (r, seen) = until_shown(&server, keys(&server, &["UP"]).await, "$'\\EOA'").await;
    assert!(seen.contains("$'\\EOA'\n"), "{seen}");
    assert_eq!(ended(&server, r).await["exit_code"], 0);
}

/// Issue 18 (M1): `up` reached pdb as the Up arrow. Text is text; text
/// that is exactly a key's name (`UP`) is typed too, and the reply says
/// how to press the key instead, in the text and in the notes.
#[tokio::test]
async fn input_text_is_typed_and_a_key_name_gets_a_note() {
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    let program = "def inner():\n    x = 'inner-x'\n    raise ValueError\n\n\
                   def outer():\n    x = 'outer-x'\n    inner()\n\nouter()\n";
    std::fs::write(server.cwd().join("crash.py"), program).expect("write the program");
    let r = server
        .terminal(json!({"command": "python3 -m pdb -c continue crash.py", "timeout": 20}))
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let input = |text: &str| json!({"command": text, "is_input": true, "timeout": 20});
    let r = server.terminal(input("up")).await;
    assert!(r.output().contains("outer()"), "{r:#?}");
    assert_eq!(r["key_sent"], Value::Null, "{r:#?}");
    let r = server.terminal(input("p x")).await;
    assert!(r.output().contains("'outer-x'"), "{r:#?}");
    let note = "[This input was typed as text, followed by Enter. To press the key DOWN \
                instead, send keys=[\"DOWN\"].]";
    assert!(!r.text.contains("This input was typed as text"), "{}", r.text);
    let r = server.terminal(input("DOWN")).await;
    assert!(r.output().contains("NameError: name 'DOWN' is not defined"), "{r:#?}");
    assert!(r.text.contains(note), "{}", r.text);
    let notes = r["notes"].as_array().cloned().unwrap_or_default();
    assert!(notes.iter().any(|n| n == note), "{r:#?}");
    // Control keys are still keys.
    let r = server.terminal(json!({"command": "C-d", "is_input": true, "timeout": 20})).await;
    assert_eq!(r["key_sent"], "C-d", "{r:#?}");
}

/// Keys at the shell's prompt are not sent, text without Enter included
/// (the next command would be glued to it); the reply says so.
#[tokio::test]
async fn keys_at_the_prompt_are_not_sent() {
    let server = Server::start().await;
    let r = keys(&server, &["touch typed", "ENTER"]).await;
    assert!(!r.is_error, "{r:#?}");
    let notice = "[No command is running, so nothing was sent (text(11) ENTER): the shell is at \
                  its prompt, and keys go only to a running program.]";
    assert!(r.text.contains(notice), "{}", r.text);
    let r = keys(&server, &["echo glued"]).await;
    assert!(r.text.contains("nothing was sent (text(10))"), "{}", r.text);
    let r = server.terminal(json!({"command": "test -e typed && echo TYPED; echo clean"})).await;
    assert_eq!(r.output(), "clean\n", "{r:#?}");
    // Without `command`, at the prompt: a poll of nothing.
    let r = server.terminal(json!({})).await;
    assert!(r.is_error && r.text.contains("No command is running"), "{r:#?}");
}

/// Bad keys are errors that say what to send, and nothing is sent: the
/// program still waits, and gets the next valid keys.
#[tokio::test]
async fn bad_keys_are_errors_that_list_the_keys() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "IFS= read -rsn3 k; printf '%q\\n' \"$k\"", "timeout": 3}))
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let names = ["UP", "PGDN", "S-TAB", "F1 to F12", "C-<x>", "M-<x>", "typed as text"];
    let too_many: Vec<&str> = vec!["x"; 65];
    let too_long = "y".repeat(4097);
    let cases: &[(Value, &[&str])] = &[
        (json!({"keys": ["F13"]}), &["unknown key \"F13\""]),
        (json!({"keys": ["C-1"]}), &["unknown key \"C-1\""]),
        (json!({"keys": ["DOWN", "M-"]}), &["unknown key \"M-\""]),
        (json!({"keys": ["Ctrl+C"]}), &["`keys` item \"Ctrl+C\" is written C-c"]),
        (json!({"keys": ["RETURN"]}), &["`keys` item \"RETURN\" is written ENTER"]),
        (json!({"keys": ["a", ""]}), &["`keys` item 2 is empty"]),
        (json!({"keys": too_many}), &["`keys` has 65 items, more than the 64"]),
        (json!({"keys": [too_long]}), &["`keys` holds 4097 bytes, more than the 4096"]),
        (json!({"keys": ["q"], "command": "ls"}), &["`keys` go to the running program, alone"]),
        (json!({"keys": ["q"], "reset": true}), &["`keys` go to the running program, alone"]),
        (json!({"keys": "UP"}), &["`keys`", "sequence"]),
    ];
    for (args, words) in cases {
        let r = server.terminal(args.clone()).await;
        assert!(r.is_error, "{args}: {r:#?}");
        for word in *words {
            assert!(r.text.contains(word), "{args}: {word:?} not in {}", r.text);
        }
        if r.text.starts_with("unknown key") || r.text.contains("is written") {
            for name in names {
                assert!(r.text.contains(name), "{args}: {name:?} not in {}", r.text);
            }
        }
    }
    let r = ended(&server, keys(&server, &["S-TAB"]).await).await;
    assert_eq!(r.output(), "$'\\E[Z'\n", "S-TAB, and only it: {r:#?}");
}
