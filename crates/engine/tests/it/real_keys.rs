//! Keys with real programs (issue 18): text sent as input reaches
//! debuggers as typed (pdb's and gdb's `up` and `down` are commands, not
//! arrows), and keys arrive as xterm sends them, arrows, Home and End in
//! the program's cursor-key mode: a Python `curses` program gets every
//! named key as its own key code, a plain program in normal mode gets
//! `ESC [ A`, and htop and ncdu do what the keys mean. Programs that are
//! not installed are skipped with a message (and fail under `CI=true`).

use std::path::Path;

use shellkeep_engine::{Call, InputReport, Outcome, Reply, Request};

use crate::{Term, eventually, installed, poll_until};

/// The lines of `file`, once it holds at least `count` of them.
async fn lines_of(file: &Path, count: usize) -> Vec<String> {
    let read = || std::fs::read_to_string(file).unwrap_or_default();
    eventually(|| read().lines().count() >= count).await;
    read().lines().map(str::to_owned).collect()
}

/// The reply that shows `text`: `first` (a reply for the running command)
/// when its output holds it, else the poll after which the output since
/// `first` holds it (or the command ended).
async fn until_shown(term: &Term, first: Reply, text: &str) -> Reply {
    let mut seen = first.output.text.clone();
    if seen.contains(text) || first.exit_code().is_some() {
        return first;
    }
    poll_until(
        async || {
            let reply = term.call(Request::new(Call::Poll)).await;
            seen.push_str(&reply.output.text);
            (reply, seen.clone())
        },
        |(reply, seen)| seen.contains(text) || reply.exit_code().is_some(),
    )
    .await
    .0
}

/// The reply that reports the command's end: `reply` or a later poll.
async fn ended(term: &Term, reply: Reply) -> Reply {
    if reply.exit_code().is_some() {
        return reply;
    }
    poll_until(async || term.call(Request::new(Call::Poll)).await, |r| r.exit_code().is_some())
        .await
}

/// Whether the program (or the shell's `read`) waits for input.
fn waits(reply: &Reply) -> bool {
    matches!(reply.outcome, Outcome::WaitingForInput { .. })
}

/// A program that crashes two frames deep, each frame with its own `x`.
const CRASH_PY: &str = "def inner(y):\n    x = 'inner-x'\n    raise ValueError(y)\n\n\
                        def outer():\n    x = 'outer-x'\n    inner(x)\n\nouter()\n";

/// Issue 18 (M1): `up` was sent as the Up arrow, recalling pdb's last
/// command into its input line; the next command was glued to it. Text is
/// text: `up` and `down` move between frames, as typed in a terminal.
#[tokio::test]
async fn pdb_up_and_down_are_debugger_commands() {
    if !installed("python3") {
        return;
    }
    let term = Term::new("keys-pdb").await;
    std::fs::write(term.cwd().join("crash.py"), CRASH_PY).expect("write the program");
    let reply = term.run_for("python3 -m pdb -c continue crash.py", 20.0).await;
    assert!(waits(&reply) && reply.output.text.contains("(Pdb) "), "{reply:#?}");
    let steps = [
        ("p x", "'inner-x'"),
        ("up", "outer()"),
        ("p x", "'outer-x'"),
        ("down", "inner()"),
        ("p x", "'inner-x'"),
        // In any case: text is typed, never a key.
        ("UP", "NameError: name 'UP' is not defined"),
        ("p x", "'inner-x'"),
        ("up", "outer()"),
        ("END", "NameError: name 'END' is not defined"),
        ("p x", "'outer-x'"),
    ];
    for (text, expected) in steps {
        let reply = term.input(text, 20.0).await;
        assert!(reply.output.text.contains(expected), "{text}: {reply:#?}");
        assert!(waits(&reply), "{text}: {reply:#?}");
        let total = text.len() + 1;
        let sent = InputReport::Sent { key: None, delivered: total, total };
        assert_eq!(reply.input, Some(sent), "{text}");
        assert!(!reply.output.text.contains("SyntaxError"), "{text}: {reply:#?}");
    }
    term.session.close().await;
}

/// A C program that crashes two frames deep, each frame with its own `x`.
const CRASH_C: &str = "static int inner(int y) { int x = y * 2; volatile int *p = 0; \
                       return *p + x; }\nstatic int outer(void) { int x = 21; \
                       return inner(x); }\nint main(void) { return outer(); }\n";

/// Issue 18 (M1): gdb's `up` recalled `bt` and the next `print` became
/// `runprint`. Text is text: gdb's `up`, `down` and `print` work.
#[tokio::test]
async fn gdb_up_and_down_are_debugger_commands() {
    if !installed("gdb") || !installed("cc") {
        return;
    }
    let term = Term::new("keys-gdb").await;
    std::fs::write(term.cwd().join("crash.c"), CRASH_C).expect("write the program");
    let reply = term.run_for("cc -g -O0 -o crash crash.c", 60.0).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:#?}");
    let gdb = "gdb -q -nx -iex 'set debuginfod enabled off' -iex 'set pagination off' \
               -iex 'set confirm off' ./crash";
    let reply = term.run_for(gdb, 20.0).await;
    assert!(waits(&reply) && reply.output.text.contains("(gdb) "), "{reply:#?}");
    let steps = [
        ("run", "SIGSEGV"),
        ("print x", "= 42"),
        ("up", "outer"),
        ("print x", "= 21"),
        ("down", "inner"),
        ("print x", "= 42"),
        ("UP", "Undefined command: \"UP\""),
        ("print x", "= 42"),
    ];
    for (text, expected) in steps {
        let reply = term.input(text, 30.0).await;
        assert!(reply.output.text.contains(expected), "{text}: {reply:#?}");
        assert!(waits(&reply), "{text}: {reply:#?}");
        assert!(!reply.output.text.contains("runprint"), "{text}: {reply:#?}");
    }
    let reply = term.input("quit", 20.0).await;
    assert!(reply.exit_code().is_some(), "{reply:#?}");
    term.session.close().await;
}

/// A curses program with `keypad(True)` (so in application cursor-key
/// mode) that writes the name of every key code it gets to the file named
/// by its argument, one per line, until `q`.
const CURSES_PY: &str = include_str!("../data/curses_keys.py");

/// Issue 18 (M2): curses programs read the normal-mode arrows `ESC [ B`
/// as three keys. In application mode, which curses turns on, every named
/// key arrives as its own key code; text in a list is its letters; one `q`
/// arrives alone, with no Enter after it.
#[tokio::test]
async fn a_curses_program_gets_every_key_as_one_key_code() {
    if !installed("python3") {
        return;
    }
    let term = Term::new("keys-curses").await;
    std::fs::write(term.cwd().join("keys.py"), CURSES_PY).expect("write the program");
    let log = term.cwd().join("keys.log");
    let reply = term.run_for("python3 keys.py keys.log", 5.0).await;
    until_shown(&term, reply, "ready for keys").await;
    let keys = [
        ("UP", "KEY_UP"),
        ("DOWN", "KEY_DOWN"),
        ("LEFT", "KEY_LEFT"),
        ("RIGHT", "KEY_RIGHT"),
        ("HOME", "KEY_HOME"),
        ("END", "KEY_END"),
        ("PGUP", "KEY_PPAGE"),
        ("PGDN", "KEY_NPAGE"),
        ("INS", "KEY_IC"),
        ("DEL", "KEY_DC"),
        ("TAB", "^I"),
        ("S-TAB", "KEY_BTAB"),
        ("BS", "KEY_BACKSPACE"),
        ("ENTER", "^J"),
        ("SPACE", " "),
        ("F1", "KEY_F(1)"),
        ("F2", "KEY_F(2)"),
        ("F3", "KEY_F(3)"),
        ("F4", "KEY_F(4)"),
        ("F5", "KEY_F(5)"),
        ("F6", "KEY_F(6)"),
        ("F7", "KEY_F(7)"),
        ("F8", "KEY_F(8)"),
        ("F9", "KEY_F(9)"),
        ("F10", "KEY_F(10)"),
        ("F11", "KEY_F(11)"),
        ("F12", "KEY_F(12)"),
        ("C-a", "^A"),
        ("up", "u"),
    ];
    let names: Vec<&str> = keys.iter().map(|(name, _)| *name).collect();
    let reply = term.keys(&names, 10.0).await;
    let mut expected: Vec<&str> = keys.iter().map(|(_, code)| *code).collect();
    // Text is typed letter by letter.
    expected.push("p");
    assert_eq!(lines_of(&log, expected.len()).await, expected, "{reply:#?}");
    let described = names.join(" ").replace(" up", " text(2)");
    assert!(
        matches!(&reply.input, Some(InputReport::Sent { key: Some(key), .. }) if *key == described),
        "{reply:#?}"
    );
    // Alt sends ESC first.
    term.keys(&["M-x"], 10.0).await;
    expected.extend(["^[", "x"]);
    assert_eq!(lines_of(&log, expected.len()).await, expected);
    // One `q`, and nothing after it: the program ends on it.
    let reply = ended(&term, term.keys(&["q"], 10.0).await).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:#?}");
    expected.push("q");
    assert_eq!(lines_of(&log, expected.len()).await, expected);
    term.session.close().await;
}

/// The cursor keys follow the mode the program sets, whatever program:
/// plain bash reads them raw, first in normal mode (`ESC [ A`, as xterm
/// sends them by default), then in application mode (`ESC O A`).
#[tokio::test]
async fn arrows_home_and_end_follow_the_cursor_key_mode() {
    let term = Term::new("keys-modes").await;
    let log = term.cwd().join("raw.log");
    let reader = "for m in l h; do printf \"\\e[?1$m\"; echo \"mode $m set\"; \
                  for i in 1 2 3 4 5 6; do IFS= read -rsn3 k; printf '%q\\n' \"$k\" >> raw.log; \
                  done; done; printf '\\e[?1l'";
    let arrows = ["UP", "DOWN", "LEFT", "RIGHT", "HOME", "END"];
    let reply = term.run_for(reader, 5.0).await;
    until_shown(&term, reply, "mode l set").await;
    let reply = term.keys(&arrows, 10.0).await;
    until_shown(&term, reply, "mode h set").await;
    let reply = term.keys(&arrows, 10.0).await;
    let expected = [
        "$'\\E[A'", "$'\\E[B'", "$'\\E[D'", "$'\\E[C'", "$'\\E[H'", "$'\\E[F'", "$'\\EOA'",
        "$'\\EOB'", "$'\\EOD'", "$'\\EOC'", "$'\\EOH'", "$'\\EOF'",
    ];
    assert_eq!(lines_of(&log, 12).await, expected);
    let reply = ended(&term, reply).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:#?}");
    term.session.close().await;
}

/// Issue 18 (M2): htop read DOWN as `ESC`, `[`, `B`, and `[` lowered the
/// selected process's priority. Now DOWN moves the selection and `q` (no
/// Enter) quits; the process keeps its priority.
#[tokio::test]
async fn htop_moves_on_down_and_renices_nothing() {
    if !installed("htop") {
        return;
    }
    let term = Term::new("keys-htop").await;
    // The priority before and after (shells start at nice 10 by default).
    let command = "sleep 120 & S=$!; B=$(ps -o ni= -p $S | tr -d ' '); htop -p $S; \
                   echo \"nice=$B:$(ps -o ni= -p $S | tr -d ' ')\"; kill $S";
    let reply = term.run_for(command, 5.0).await;
    until_shown(&term, reply, "sleep 120").await;
    term.keys(&["DOWN", "DOWN", "UP"], 10.0).await;
    let reply = term.keys(&["q"], 10.0).await;
    let reply = ended(&term, until_shown(&term, reply, "nice=").await).await;
    let output = term.session.output().get(reply.number).expect("the output is kept");
    let text = output.read(0, 10_000).expect("read the output").text;
    let (before, after) = text
        .split("nice=")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .and_then(|pair| pair.split_once(':'))
        .expect("the priorities");
    assert!(!before.is_empty() && before == after, "{text}");
    term.session.close().await;
}

/// Issue 18 (M2): in ncdu, RIGHT was read as `ESC`, `[`, `C`, and `C`
/// sorted the list by item count instead of opening the directory. Now
/// DOWN selects the second directory and RIGHT opens it.
#[tokio::test]
async fn ncdu_opens_the_directory_the_arrows_choose() {
    if !installed("ncdu") {
        return;
    }
    let term = Term::new("keys-ncdu").await;
    let tree = term.cwd().join("tree");
    for (dir, size) in [("big", 200_000), ("small", 10_000)] {
        std::fs::create_dir_all(tree.join(dir)).expect("a directory");
        std::fs::write(tree.join(dir).join("data"), vec![b'x'; size]).expect("a file");
    }
    std::fs::write(tree.join("small").join("inside-small"), b"x").expect("a file");
    let reply = term.run_for("ncdu -x tree", 5.0).await;
    let reply = until_shown(&term, reply, "small").await;
    assert!(reply.exit_code().is_none(), "ncdu runs: {reply:#?}");
    let reply = term.keys(&["DOWN", "RIGHT"], 10.0).await;
    let reply = until_shown(&term, reply, "inside-small").await;
    assert!(reply.exit_code().is_none(), "ncdu still runs: {reply:#?}");
    let reply = ended(&term, term.keys(&["q"], 10.0).await).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:#?}");
    term.session.close().await;
}
