//! The renderer through a real bash in a real PTY: output that is hostile
//! to a terminal emulator, full-screen programs that never leave, and
//! programs that ask the terminal where the cursor is (issues 6 and 7).

use crate::Term;

/// Issue 7: cursor movement with huge counts aborted the server on a 1 GB
/// allocation; moving down wrote 131 MB of empty lines. The window bounds
/// both: the cursor stops at the last column and the last row.
#[tokio::test]
async fn huge_cursor_moves_stop_at_the_window() {
    let term = Term::new("screen-moves").await;
    let reply = term.run("for i in $(seq 4000); do printf '\\e[65535C'; done; echo x").await;
    assert_eq!(reply.output.text, format!("{}x\n", " ".repeat(199)));
    assert_eq!(reply.exit_code, Some(0));

    let reply = term.run("for i in $(seq 3000); do printf '\\e[65535B'; done; echo x").await;
    assert_eq!(reply.output.text, format!("{}x\n", "\n".repeat(49)));
    assert!(!reply.output.truncated);

    let reply =
        term.run("printf 'abc\\r\\e[65535@\\e[1;65535H\\e[65535G\\e[65535dx\\e[65535b\\n'").await;
    assert_eq!(reply.output.text, format!("{}{}\n", " ".repeat(199), "x".repeat(201)));
    let reply = term.run("printf 'a\\nb\\rc\\r\\e[65535L\\n'").await;
    assert_eq!(reply.output.text, format!("a\n{}c", "\n".repeat(48)));
    term.session.close().await;
}

/// Issue 7: output printed on the alternate screen is kept when the command
/// ends without leaving it.
#[tokio::test]
async fn output_on_an_alternate_screen_that_is_never_left_is_kept() {
    let term = Term::new("screen-alt").await;
    let reply = term.run("printf '\\e[?1049h'; echo IMPORTANT; (exit 3)").await;
    assert_eq!(reply.output.text, "IMPORTANT\n");
    assert_eq!(reply.exit_code, Some(3));

    // A traceback longer than the screen, printed before the shell returns.
    let reply = term
        .run(
            "printf 'before\\n\\e[?1049h'; \
             python3 -c 'import sys; [print(\"frame\", n, file=sys.stderr) for n in range(60)]; \
             raise SystemExit(\"Traceback: boom\")'",
        )
        .await;
    let frames: String = (0..60).map(|n| format!("frame {n}\n")).collect();
    assert_eq!(reply.output.text, format!("before\n{frames}Traceback: boom\n"));
    assert_eq!(reply.exit_code, Some(1));

    // The next command renders on the normal screen again.
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// Issue 6: cursor-position and device-attribute queries are answered, so
/// programs that ask (prompt_toolkit in ipython, `read -t` prompts) do not
/// hang. Like them, each program here turns off echo or line mode first.
#[tokio::test]
async fn terminal_queries_are_answered() {
    let term = Term::new("screen-queries").await;
    // What prompt_toolkit does: raw mode, then the query, then read.
    let raw = "python3 -c \"import os, select, termios, tty\n\
               old = termios.tcgetattr(0); tty.setraw(0); os.write(1, b'ab\\x1b[6n'); r = b''\n\
               while not r.endswith(b'R') and select.select([0], [], [], 5)[0]: r += os.read(0, 1)\n\
               termios.tcsetattr(0, termios.TCSADRAIN, old); print(' got', r[2:].decode())\"";
    let reply = term.run(raw).await;
    assert_eq!(reply.output.text, "ab got 1;3R\n");
    let reply = term
        .run("stty -echo; printf 'abc\\e[6n'; IFS= read -r -d R -t 5 pos; stty echo; echo \" at ${pos#*[}\"")
        .await;
    assert_eq!(reply.output.text, "abc at 1;4\n");
    let reply = term
        .run("stty -echo; printf '\\e[c'; IFS= read -r -d c -t 5 da; stty echo; echo \"${da#*[}\"")
        .await;
    assert_eq!(reply.output.text, "?1;2\n");
    let reply = term
        .run("stty -echo; printf '\\e[>c'; IFS= read -r -d c -t 5 da; stty echo; echo \"${da#*[}\"")
        .await;
    assert_eq!(reply.output.text, ">0;10;0\n");
    // A query nobody reads (the terminal is in line mode with echo) is not
    // answered: the answer would be echoed, then typed into the shell.
    let reply = term.run("printf 'x\\e[6n\\e[c\\n'").await;
    assert_eq!(reply.output.text, "x\n");
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// Issue 6: wide characters take two columns.
#[tokio::test]
async fn wide_characters_overwrite_as_on_a_terminal() {
    let term = Term::new("screen-wide").await;
    let reply = term.run("printf 'abc\\r中文\\n'; printf '😀 ok\\n'").await;
    assert_eq!(reply.output.text, "中文\n😀 ok\n");
    term.session.close().await;
}
