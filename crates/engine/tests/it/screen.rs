//! The renderer through a real bash in a real PTY: output that is hostile
//! to a terminal emulator, full-screen programs that never leave, programs
//! that ask the terminal where the cursor is (issues 6 and 7), and output
//! that tries to hide output (issue 11).
//!
//! For: what a session commits and replies when a real program prints
//! such bytes. Not for: the renderer's rules sequence by sequence (the
//! unit tests in `screen.rs`) or recorded programs (`recorded.rs`).
//! Invariants held: output cannot hide output, and the renderer's memory
//! is bounded by its window, through a whole session.

use std::path::{Path, PathBuf};

use shellkeep_engine::Reply;
use shellkeep_engine::Screen;

use crate::Term;

/// The complete output of the command `reply` is about, as the `output`
/// tool reads it from the session's store.
fn full_output(term: &Term, reply: &Reply) -> String {
    let log = term.session.output().get(reply.number).expect("the command's output is kept");
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let page = log.read(offset, 5_000).expect("read the output");
        text.push_str(&page.text);
        if page.lines == 0 {
            return text;
        }
        offset = (page.first_line + page.lines) as i64;
    }
}

/// Issue 7: cursor movement with huge counts aborted the server on a 1 GB
/// allocation; moving down wrote 131 MB of empty lines. The window bounds
/// both: the cursor stops at the last column (of 120) and the last row.
#[tokio::test]
async fn huge_cursor_moves_stop_at_the_window() {
    let term = Term::new("screen-moves").await;
    let reply = term.run("for i in $(seq 4000); do printf '\\e[65535C'; done; echo x").await;
    assert_eq!(reply.output.text, format!("{}x\n", " ".repeat(119)));
    assert_eq!(reply.exit_code(), Some(0));

    let reply = term.run("for i in $(seq 3000); do printf '\\e[65535B'; done; echo x").await;
    assert_eq!(reply.output.text, format!("{}x\n", "\n".repeat(49)));
    assert!(!reply.output.truncated);

    let reply =
        term.run("printf 'abc\\r\\e[65535@\\e[1;65535H\\e[65535G\\e[65535dx\\e[65535b\\n'").await;
    // `\e[65535d` goes to the last row (of 50), as `H` does.
    let expected = format!("{}{}{}\n", "\n".repeat(49), " ".repeat(119), "x".repeat(121));
    assert_eq!(reply.output.text, expected);
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
    assert_eq!(reply.exit_code(), Some(3));

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
    assert_eq!(reply.exit_code(), Some(1));

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

/// Issue 11: an escape sequence a command never ends swallowed all its
/// later text (`printf '\e]8;;'; echo done` printed nothing). Now it is
/// abandoned at a line feed or at the end of the command, and shown.
#[tokio::test]
async fn an_unterminated_escape_sequence_hides_nothing() {
    let term = Term::new("screen-stray").await;
    let reply = term.run("printf '\\e]8;;'; echo done").await;
    assert_eq!(reply.output.text, "]8;;done\n");
    assert_eq!(full_output(&term, &reply), "]8;;done\n");
    // Every kind of string, and a CSI sequence that numbers would feed.
    for (open, shown) in [("\\eP", "P"), ("\\e_G", "_G"), ("\\eX", "X"), ("\\e^", "^")] {
        let reply = term.run(&format!("printf '{open}'; echo done; echo more")).await;
        assert_eq!(reply.output.text, format!("{shown}done\nmore\n"), "{open}");
    }
    let reply = term.run("printf '\\e['; seq 1 3").await;
    assert_eq!(reply.output.text, "[1\n2\n3\n");
    // Left open at the very end of the command: its end abandons it.
    let reply = term.run("echo first; printf '\\e]0;FATAL: tail'").await;
    assert_eq!(reply.output.text, "first\n]0;FATAL: tail");
    assert_eq!(reply.exit_code(), Some(0));
    // Longer than any real one, with no line feed (a page of the complete
    // output holds at most 30,000 characters).
    let reply = term.run("printf '\\e]52;c;'; head -c 20000 /dev/zero | tr '\\0' A; echo").await;
    assert_eq!(full_output(&term, &reply), format!("]52;c;{}\n", "A".repeat(20_000)));
    // Nothing is left over for the next command.
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// Issue 11: `echo FATAL >&2; printf '\e[1A\e[2K…all passed\n'` left only
/// "all passed" in the reply and in the complete output.
#[tokio::test]
async fn an_erased_line_is_kept() {
    let term = Term::new("screen-erased").await;
    let reply = term
        .run(
            "echo 'FATAL: 3 tests FAILED' >&2; \
             printf '\\e[1A\\e[2K\\e[1A\\e[2Kall 120 tests passed\\n'; true",
        )
        .await;
    let expected = "FATAL: 3 tests FAILED\nall 120 tests passed\n";
    assert_eq!(reply.output.text, expected);
    assert_eq!(full_output(&term, &reply), expected);
    assert_eq!(reply.exit_code(), Some(0));
    // Overwritten after a carriage return, erased and left blank, erased
    // below.
    let reply = term.run("echo 'error: boom'; printf '\\e[A\\rall fine   \\n'").await;
    assert_eq!(reply.output.text, "error: boom\nall fine\n");
    let reply = term.run("echo 'FATAL: disk full'; printf '\\e[A\\e[2K'").await;
    assert_eq!(reply.output.text, "FATAL: disk full\n");
    let reply = term.run("echo FATAL; echo two; printf '\\e[2A\\e[Jclean\\n'").await;
    assert_eq!(reply.output.text, "FATAL\nclean\ntwo\n");
    term.session.close().await;
}

/// Issue 11: progress displays that redraw themselves keep their final
/// state, however many frames they draw.
#[tokio::test]
async fn progress_displays_keep_their_final_frame() {
    let term = Term::new("screen-progress").await;
    // `pip`-style: one line rewritten after `\r`.
    let reply = term
        .run("for i in $(seq 0 2000); do printf '\\r  %3d%% |%-20s|' $((i / 20)) x; done; echo")
        .await;
    assert_eq!(reply.output.text, "  100% |x                   |\n");
    // `docker pull`-style: cursor up over the layers, erase, redraw, down.
    let docker = "printf 'a1: Waiting\\nb2: Waiting\\n'; \
                  for i in $(seq 1 1500); do \
                    printf '\\e[2A\\e[2K\\ra1: Downloading %d\\r\\e[2B' $i; \
                    printf '\\e[1A\\e[2K\\rb2: Downloading %d\\r\\e[1B' $i; \
                  done; \
                  printf '\\e[2A\\e[2K\\ra1: Pull complete\\r\\e[2B\\e[1A\\e[2K\\rb2: Pull complete\\r\\e[1B'; \
                  echo Done";
    let reply = term.run(docker).await;
    let expected = "a1: Pull complete\nb2: Pull complete\nDone\n";
    assert_eq!(reply.output.text, expected);
    assert_eq!(full_output(&term, &reply), expected);
    term.session.close().await;
}

/// Issue 11: `printf '\e[?1049h'; echo FIRST; seq 1 100000` kept no
/// `FIRST` anywhere: only the last two screens survived.
#[tokio::test]
async fn what_scrolls_off_a_full_screen_view_is_kept() {
    let term = Term::new("screen-scrolled").await;
    let first = term.run("printf '\\e[?1049h'; echo FIRST; seq 1 100000").await;
    // On a busy machine the lines come slowly enough to look like a
    // program redrawing its screen: the call hands back the screen, and
    // the command ends in a later one.
    let reply = if first.is_running() {
        crate::poll_until(async || term.run_for("", 5.0).await, |r| !r.is_running()).await
    } else {
        assert!(first.output.text.starts_with("FIRST\n1\n2\n3\n"), "{}", &first.output.text[..100]);
        first.clone()
    };
    assert!(reply.output.text.ends_with("\n99999\n100000\n"));
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(full_output(&term, &first), format!("FIRST\n{expected}"));
    // A program that redraws in place keeps its last screen only.
    let reply = term
        .run(
            "printf '\\e[?1049h'; for i in $(seq 1 300); do printf '\\e[H\\e[2Jframe %d\\e[3;1Hrow three' $i; done",
        )
        .await;
    assert_eq!(reply.output.text, "frame 300\n\nrow three\n");
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// Issue 11: `echo FATAL-E; printf '\e[1A\e[999T'; echo ok` gave
/// `FATAL-E\nokTAL-E`: scrolling and deleting lines left the old text
/// under the new. A line scrolled or deleted away is kept whole, and what
/// is printed after is a line of its own.
#[tokio::test]
async fn scrolled_and_deleted_lines_are_kept_whole() {
    let term = Term::new("screen-scroll").await;
    for op in ["\\e[999T", "\\e[999S", "\\e[999M", "\\e[2T", "\\e[M", "\\eM\\eM"] {
        let reply = term.run(&format!("echo FATAL-E; printf '\\e[1A{op}'; echo ok")).await;
        let lines: Vec<&str> = reply.output.text.lines().collect();
        assert!(
            lines.contains(&"FATAL-E") && lines.contains(&"ok"),
            "{op}: {:?}",
            reply.output.text
        );
        assert!(
            lines.iter().all(|line| ["", "FATAL-E", "ok"].contains(line)),
            "{op}: {:?}",
            reply.output.text
        );
        assert_eq!(full_output(&term, &reply), reply.output.text, "{op}");
    }
    let reply = term.run("echo FATAL-E; printf '\\e[1A\\e[999T'; echo ok").await;
    assert_eq!(reply.output.text, "FATAL-E\nok\n");
    // On a full screen, with a scroll region, inserting a line: what is
    // pushed off the bottom is kept.
    let reply = term.run("seq 1 60; printf '\\e[1;20r\\e[3A\\e[L'; echo ok; printf '\\e[r'").await;
    let lines: Vec<&str> = reply.output.text.lines().collect();
    for n in 1..=60 {
        assert!(lines.contains(&n.to_string().as_str()), "{n}: {:?}", reply.output.text);
    }
    assert!(lines.contains(&"ok"), "{:?}", reply.output.text);
    assert!(
        lines.iter().all(|line| line.is_empty() || *line == "ok" || line.parse::<u32>().is_ok())
    );
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// Issue 18: `nohup: ignoring input` came back as `nohup:` in one reply and
/// `ignoring input` in the next: the blank at the end of the unfinished
/// line was lost. Every character of a line completed across replies comes
/// back, once, whatever the replies in between show.
#[tokio::test]
async fn a_line_completed_across_replies_keeps_every_character() {
    let term = Term::new("screen-across").await;
    let gate = term.cwd().join("gate");
    let command = "printf 'nohup: '; while [ ! -e gate ]; do sleep 0.05; done; \
                   rm gate; printf 'ignoring  '; while [ ! -e gate ]; do sleep 0.05; done; \
                   echo input";
    let first = term.run_for(command, 0.5).await;
    assert!(first.is_running(), "{first:?}");
    assert_eq!(first.output.text, "nohup: ");
    // A poll while nothing changed shows nothing again.
    let poll = term.run_for("", 0.2).await;
    assert!(poll.is_running(), "{poll:?}");
    assert_eq!(poll.output.text, "");
    std::fs::write(&gate, "").expect("open the gate");
    let second = crate::poll_until(
        async || term.run_for("", 0.2).await,
        |reply| !reply.output.text.is_empty(),
    )
    .await;
    assert_eq!(second.output.text, "ignoring  ");
    crate::eventually(|| !gate.exists()).await;
    std::fs::write(&gate, "").expect("open the gate");
    let last =
        crate::poll_until(async || term.run_for("", 0.5).await, |reply| !reply.is_running()).await;
    assert_eq!(last.output.text, "input\n");
    assert_eq!(full_output(&term, &last), "nohup: ignoring  input\n");
    term.session.close().await;
}

/// Issue 18: a command whose last line is unfinished when it ends keeps
/// the blanks it printed at its end: `nohup cmd &` printed `nohup: ` before
/// the prompt came back and `ignoring input` after, and the reply said
/// `nohup:`. The rest of the line comes with the next reply.
#[tokio::test]
async fn an_unfinished_last_line_keeps_its_trailing_blanks() {
    let term = Term::new("screen-unfinished").await;
    let reply = term.run("printf 'nohup: '").await;
    assert_eq!(reply.output.text, "nohup: ");
    assert_eq!(full_output(&term, &reply), "nohup: ");
    // What `nohup` does: half the line before the prompt, the rest after.
    let reply = term
        .run(
            "(printf 'nohup: '; touch printed; until [ -e gate ]; do sleep 0.05; done; \
             echo 'ignoring input') & until [ -e printed ]; do sleep 0.05; done",
        )
        .await;
    assert!(reply.output.text.ends_with("\nnohup: "), "{:?}", reply.output.text);
    std::fs::write(term.cwd().join("gate"), "").expect("open the gate");
    // The rest of the line comes with a later reply: as output printed
    // between commands, or while the next command ran (on a busy machine),
    // maybe beside the shell's `[1]+ Done` line, which quotes the command.
    let seen = std::cell::RefCell::new(String::new());
    crate::poll_until(
        async || {
            let reply = term.run("true").await;
            let mut seen = seen.borrow_mut();
            seen.push_str(reply.idle_output.as_deref().unwrap_or_default());
            seen.push_str(&reply.output.text);
            seen.clone()
        },
        |seen| seen.lines().any(|line| line.starts_with("ignoring input")),
    )
    .await;
    let seen = seen.into_inner();
    let rest = seen.lines().find(|line| line.contains("ignoring input") && !line.contains("Done"));
    assert_eq!(rest, Some("ignoring input"), "{seen:?}");
    term.session.close().await;
}

/// The recorded progress displays in `tests/data` (its README says how
/// each was made), all recorded on a terminal of 120 columns and 40 rows.
const RECORDINGS: &[&str] = &["uv-sync", "pip-install", "cargo-build", "npm-install"];

/// The size of the terminal the recordings were made on.
const RECORDED_ROWS: u16 = 40;
/// See [`RECORDED_ROWS`].
const RECORDED_COLS: u16 = 120;

/// A file in `tests/data`.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// The recording `name`'s bytes.
fn recording(name: &str) -> Vec<u8> {
    std::fs::read(data(&format!("{name}.bin"))).expect("the recording is there")
}

/// The stored text `{name}.{kind}.txt`: what tmux shows for the
/// recording (`tmux`) or what the renderer commits (`shellkeep`).
fn stored(name: &str, kind: &str) -> String {
    std::fs::read_to_string(data(&format!("{name}.{kind}.txt")))
        .expect("the expected text is there")
}

/// Writes `text` as the stored text `{name}.{kind}.txt` when asked to
/// (`SHELLKEEP_BLESS=1`, after a new recording or a change of renderer).
fn bless(name: &str, kind: &str, text: &str) {
    if std::env::var_os("SHELLKEEP_BLESS").is_some_and(|bless| bless == "1") {
        std::fs::write(data(&format!("{name}.{kind}.txt")), text).expect("write the expectation");
    }
}

/// What the renderer commits for `bytes` on a terminal of the recordings'
/// size, fed in pieces of `piece` bytes (0: whole), ended as a command's
/// end ends it.
fn rendered(bytes: &[u8], piece: usize) -> String {
    let mut screen = Screen::new(RECORDED_ROWS, RECORDED_COLS, "n0nce");
    let pieces: Vec<&[u8]> = if piece == 0 { vec![bytes] } else { bytes.chunks(piece).collect() };
    let mut text = String::new();
    for mut rest in pieces {
        while !rest.is_empty() {
            let (consumed, _) = screen.feed(rest);
            rest = &rest[consumed..];
        }
        text.push_str(&screen.take_committed());
    }
    screen.commit_all();
    screen.leave_alternate();
    text.push_str(&screen.take_committed());
    text
}

/// `text` as the two are compared: each line without its trailing blanks
/// (the renderer drops them; tmux's `-J` keeps those printed), no blank
/// lines at the end (the rest of tmux's screen), one newline at the end.
fn normalised(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last().is_some_and(|line| line.is_empty()) {
        lines.pop();
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// What tmux shows for `bytes` on a terminal of the recordings' size: its
/// screen and everything that scrolled off it, wrapped lines joined
/// (`capture-pane -J -S -`). `None` when tmux is not installed.
///
/// Tried up to three times, each with a fresh tmux server: once, in a CI
/// run with both cores loaded and the other tests of this binary stopping
/// processes around it, `capture-pane` failed with nothing on stderr, its
/// server gone. tmux is only the reference here; what it shows is checked
/// on the try that captures.
async fn tmux_shows(name: &str, bytes: &[u8]) -> Option<String> {
    let mut last = String::new();
    for attempt in 0..3 {
        match tmux_capture(&format!("{name}-{attempt}"), bytes).await {
            None => return None,
            Some(Ok(shown)) => return Some(shown),
            Some(Err(error)) => last = error,
        }
    }
    panic!("tmux failed three times for {name}: {last}");
}

/// One try of [`tmux_shows`]: `Err` with tmux's error when the capture
/// failed.
async fn tmux_capture(name: &str, bytes: &[u8]) -> Option<Result<String, String>> {
    let scratch = crate::Scratch::new(&format!("tmux-{name}"));
    let input = scratch.0.join("input");
    std::fs::write(&input, bytes).expect("write the input");
    let config = scratch.0.join("tmux.conf");
    std::fs::write(&config, "set -g history-limit 100000\n").expect("write the config");
    let done = scratch.0.join("done");
    let socket = format!("shellkeep-it-{}-{name}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &socket, "-f"])
            .arg(&config)
            .args(args)
            .output()
    };
    let shell = format!("cat '{}'; touch '{}'; sleep 600", input.display(), done.display());
    let (cols, rows) = (RECORDED_COLS.to_string(), RECORDED_ROWS.to_string());
    match tmux(&["new-session", "-d", "-x", &cols, "-y", &rows, &shell]) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => panic!("tmux: {err}"),
        Ok(out) => assert!(out.status.success(), "tmux: {}", String::from_utf8_lossy(&out.stderr)),
    }
    // Done, or its server gone (see `tmux_shows`).
    let alive = || tmux(&["has-session"]).is_ok_and(|out| out.status.success());
    crate::eventually(|| done.exists() || !alive()).await;
    let captured = tmux(&["capture-pane", "-p", "-J", "-S", "-", "-E", "-"]).expect("capture");
    let _ = tmux(&["kill-server"]);
    if !captured.status.success() {
        let error = String::from_utf8_lossy(&captured.stderr);
        return Some(Err(format!("capture-pane: {} {error}", captured.status)));
    }
    Some(Ok(String::from_utf8(captured.stdout).expect("tmux captures UTF-8")))
}

/// Issue 18: recorded progress displays of `uv`, `pip`, `cargo` and `npm`
/// come back as a terminal shows them. What the renderer commits, whether
/// the bytes come whole or a few at a time, is `*.shellkeep.txt`; every
/// line tmux shows for the same bytes (`*.tmux.txt`, which the next test
/// checks against tmux itself) is in it, in the same order, and the only
/// lines it has beyond them are erased lines it keeps on purpose (output
/// cannot hide output: the two files side by side show which). `uv` lost
/// its `Built app @ …` line and put real lines out of order when lines did
/// not wrap.
#[test]
fn recorded_progress_displays_render_as_tmux_shows_them() {
    for name in RECORDINGS {
        let bytes = recording(name);
        let whole = normalised(&rendered(&bytes, 0));
        bless(name, "shellkeep", &whole);
        let expected = stored(name, "shellkeep");
        for piece in [0, 1, 3, 64, 4096] {
            let got = normalised(&rendered(&bytes, piece));
            assert_eq!(got, expected, "{name}, in pieces of {piece} bytes");
        }
        let tmux = stored(name, "tmux");
        let mut ours = expected.lines();
        for line in tmux.lines() {
            assert!(
                ours.any(|our| our == line),
                "{name}: {line:?} is not in what the renderer shows, in tmux's order:\n{expected}"
            );
        }
    }
    // Where the renderer keeps nothing erased, it shows exactly what tmux
    // shows.
    for name in ["pip-install", "cargo-build", "npm-install"] {
        assert_eq!(stored(name, "shellkeep"), stored(name, "tmux"), "{name}");
    }
    // What the issue saw in `uv`'s display: its `Built` line is there, in
    // order, and its progress line is not.
    let uv = stored("uv-sync", "shellkeep");
    let built = uv.find("Built app @").expect("uv's Built line");
    let resolved = uv.find("Resolved 5 packages").expect("uv's Resolved line");
    let prepared = uv.find("Prepared 5 packages").expect("uv's Prepared line");
    assert!(resolved < built && built < prepared, "{uv}");
    assert!(!uv.contains("Preparing"), "{uv}");
}

/// The stored `*.tmux.txt` are what tmux shows for the recordings. tmux
/// is installed in CI, where this test fails without it; elsewhere it
/// says so and checks nothing. `SHELLKEEP_BLESS=1` writes what tmux shows.
#[tokio::test]
async fn the_stored_expectations_are_what_tmux_shows() {
    for name in RECORDINGS {
        let Some(shown) = tmux_shows(name, &recording(name)).await else {
            crate::skipping(
                "`tmux` is not installed: the expectations in tests/data are not checked",
            );
            return;
        };
        let shown = normalised(&shown);
        bless(name, "tmux", &shown);
        assert_eq!(shown, stored(name, "tmux"), "{name}: tmux shows something else");
    }
}

/// Issue 18: lines wrap at the terminal's width (120 columns here), so a
/// program that moves up over a line it knows has wrapped lands on the
/// row it means; a wrapped line comes back as one line.
#[tokio::test]
async fn lines_wrap_at_the_terminals_width() {
    let term = Term::new("screen-wrap").await;
    // The issue's case. A terminal shows `first`, `REPLACED`, `X`, `end`;
    // the row of `A`s, erased after it was seen, is kept above what
    // replaced it (output cannot hide output).
    let reply = term.run("printf 'first\\n%-120sX\\e[1A\\r\\e[2KREPLACED\\n\\nend\\n' AAAA").await;
    assert_eq!(reply.output.text, "first\nAAAA\nREPLACED\nX\nend\n");
    assert_eq!(full_output(&term, &reply), reply.output.text);
    // A line three rows long is one line; one exactly as wide as the
    // terminal, then a newline, is one line too, with no empty one after.
    let reply = term.run("head -c 300 /dev/zero | tr '\\0' x; echo; printf '%120s\\n' y").await;
    assert_eq!(reply.output.text, format!("{}\n{}y\n", "x".repeat(300), " ".repeat(119)));
    // Drawn to the width with no newline and redrawn by going up a row,
    // as `uv` draws: the line above stays.
    let reply = term
        .run(
            "echo 'Resolved 5 packages'; for i in 1 2 3; do \
               printf '%-120s%-120s' \"Preparing $i/3\" \"  bar $i\"; \
               printf '\\e[1A\\r\\e[2K\\e[1B\\r\\e[2K\\e[1A'; done; echo 'Prepared 5 packages'",
        )
        .await;
    assert_eq!(reply.output.text, "Resolved 5 packages\nPrepared 5 packages\n");
    // A command longer than the width: its echo wraps too, and none of it
    // is taken for output.
    let long = "b".repeat(300);
    let reply = term.run(&format!("echo {long}; echo after")).await;
    assert_eq!(reply.output.text, format!("{long}\nafter\n"));
    term.session.close().await;
}

/// A curses menu that shows its selected item in reverse video (`j` moves
/// the selection down, `q` picks it), as menus, `ncdu` and `htop` do.
const MENU: &str = r#"import curses

items = ["apples", "pears", "plums"]

def main(window):
    selected = 0
    while True:
        window.erase()
        window.addstr(0, 0, "Pick a fruit (j: down, q: pick)")
        for n, item in enumerate(items):
            window.addstr(2 + n, 2, item, curses.A_REVERSE if n == selected else curses.A_NORMAL)
        window.refresh()
        key = window.getch()
        if key == ord("q"):
            return items[selected]
        if key == ord("j"):
            selected = (selected + 1) % len(items)

print("picked", curses.wrapper(main))
"#;

/// Issue 18: a full screen's selected item was invisible (reverse video
/// was dropped): after DOWN in `ncdu` the reply was the one before. The row
/// in reverse video starts with the mark, and the mark follows the
/// selection.
#[tokio::test]
async fn a_full_screens_selected_item_is_marked() {
    let term = Term::new("screen-reverse").await;
    std::fs::write(term.cwd().join("menu.py"), MENU).expect("write the menu");
    let mark = shellkeep_engine::HIGHLIGHT_MARK;
    let reply = term.run_for("python3 menu.py", 10.0).await;
    assert!(reply.is_running() && reply.screen, "{reply:#?}");
    assert!(reply.output.text.contains(&format!("{mark}  apples\n  pears\n  plums")), "{reply:#?}");
    let reply = term.input("j", 5.0).await;
    let pears = format!("{mark}  pears");
    let reply = if reply.output.text.contains(&pears) {
        reply
    } else {
        crate::poll_until(async || term.run_for("", 1.0).await, |r| r.output.text.contains(&pears))
            .await
    };
    assert!(reply.output.text.contains("  apples\n") && reply.output.text.contains("\n  plums"));
    assert_eq!(reply.output.text.matches(mark).count(), 1, "{reply:#?}");
    let reply = term.input("q", 10.0).await;
    assert!(!reply.is_running(), "{reply:#?}");
    // Leaving the full screen keeps its last screen (issue 19: nothing
    // printed there is hidden), once, before what came after.
    assert_eq!(
        reply.output.text,
        format!(
            "Pick a fruit (j: down, q: pick)\n\n  apples\n{mark}  pears\n  plums\npicked pears\n"
        )
    );
    term.session.close().await;
}

/// A page repainted in place by row number (as `less -X` shows a log) with
/// lines that share their first word with the ones they replace: through a
/// real shell and PTY, every line of both pages is in the output once.
#[tokio::test]
async fn a_log_repainted_in_place_by_row_number_loses_no_line() {
    let term = Term::new("screen-repaint").await;
    let command = "for i in $(seq 60); do echo \"commit $i\"; done; \
                   for r in $(seq 50); do printf '\\e[%d;1Hcommit %d\\e[K' $r $((r + 100)); done; \
                   printf '\\e[50;1H\\n'";
    let reply = term.run(command).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    for n in (1..=60).chain(101..=150) {
        let line = format!("commit {n}\n");
        let count = reply.output.text.lines().filter(|l| format!("{l}\n") == line).count();
        assert_eq!(count, 1, "{line:?} in {:?}", reply.output.text);
    }
    term.session.close().await;
}
