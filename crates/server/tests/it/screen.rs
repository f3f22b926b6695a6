//! Output hostile to a terminal emulator, through the real binary (issue
//! 7): the server stays up, its memory stays bounded by the terminal's
//! window, and nothing printed on an alternate screen is lost. Output that
//! tries to hide output (issue 11): the reply, the full output and the
//! `output` tool keep it.

use std::time::Duration;

use serde_json::json;

use crate::{Server, installed, poll_until};

/// The server's peak resident memory so far, in bytes (`VmHWM`).
fn peak_memory(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid))
        .expect("read the server's /proc status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib * 1024
}

/// Well above what the server needs (about 15 MB), well below what the
/// unbounded renderer took for the same inputs (hundreds of MB).
const PEAK_LIMIT: u64 = 64 << 20;

/// Issue 7: 4000 cursor moves of 65535 columns aborted the server on a
/// failed 1 GB allocation; 12 KB of `ESC[65535B` became a 131 MB file.
#[tokio::test]
async fn huge_cursor_moves_neither_crash_nor_grow() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "for i in $(seq 4000); do printf '\\e[65535C'; done; echo x"}))
        .await;
    // Clamped to the 120-column window.
    assert_eq!(r.output(), format!("{}x\n", " ".repeat(119)), "{r:#?}");

    let r = server
        .terminal(json!({"command": "for i in $(seq 3000); do printf '\\e[65535B'; done; echo x"}))
        .await;
    assert_eq!(r.output(), format!("{}x\n", "\n".repeat(49)), "{r:#?}");
    assert_eq!(r["truncated"], false, "{r:#?}");

    let r = server.terminal(json!({"command": "echo alive"})).await;
    assert_eq!(r.output(), "alive\n");
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));
}

/// Issue 7: a line with no newline cost about 5 bytes per character; a
/// 100 MB OSC string was buffered whole by the parser.
#[tokio::test]
async fn a_long_line_or_osc_string_costs_about_its_own_size() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({
            "command": "head -c 20000000 /dev/zero | tr '\\0' x; echo",
            "timeout": 120,
        }))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert_eq!(r["truncated"], true, "{r:#?}");
    let full = r["full_output_path"].as_str().expect("the full output is kept");
    let full = std::fs::read(full).expect("read the full output");
    assert_eq!(full.len(), 20_000_001);
    assert!(full[..20_000_000].iter().all(|&b| b == b'x') && full.ends_with(b"\n"));
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));

    // An OSC string that never ends as one is text (issue 11): all of it is
    // in the full output, and the parser never held more than its bound.
    let r = server
        .terminal(json!({
            "command": "printf '\\e]0;'; head -c 20000000 /dev/zero | tr '\\0' t; printf '\\a'; echo after",
            "timeout": 120,
        }))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert!(r.output().ends_with("tttafter\n"), "{r:#?}");
    let full = r["full_output_path"].as_str().expect("the full output is kept");
    let full = std::fs::read(full).expect("read the full output");
    assert_eq!(full.len(), 3 + 20_000_000 + 6);
    assert!(full.starts_with(b"]0;t") && full.ends_with(b"tafter\n"));
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));
}

/// Issue 7: output printed while a program holds the alternate screen is in
/// the reply and in the full output when the command ends there.
#[tokio::test]
async fn output_on_an_alternate_screen_is_never_lost() {
    let server = Server::with(&["--output-cap", "100"]).await;
    let r =
        server.terminal(json!({"command": "printf '\\e[?1049h'; echo IMPORTANT; (exit 3)"})).await;
    assert_eq!(r.output(), "IMPORTANT\n", "{r:#?}");
    assert_eq!(r["exit_code"], 3, "{r:#?}");
    assert!(r.text.contains("IMPORTANT"), "{}", r.text);

    // Longer than the cap: the full output file has all of it.
    let r = server
        .terminal(json!({"command": "printf '\\e[?1049h'; seq 1 60; echo IMPORTANT; (exit 3)"}))
        .await;
    assert_eq!(r["exit_code"], 3, "{r:#?}");
    assert!(r.output().ends_with("IMPORTANT\n"), "{r:#?}");
    let full = r["full_output_path"].as_str().expect("the output was cut");
    let expected: String = (1..=60).map(|n| format!("{n}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(full).expect("read the full output"),
        format!("{expected}IMPORTANT\n")
    );
}

/// Every line of the latest command's complete output, read page by page
/// with the `output` tool, as an agent follows "Next: offset N".
async fn read_all(server: &Server) -> String {
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let page = server.call("output", json!({"offset": offset, "limit": 5000})).await;
        assert!(!page.is_error, "{page:#?}");
        text.push_str(page["lines"].as_str().expect("lines"));
        let next = page["next_offset"].as_u64().expect("next_offset");
        if next == offset || next >= page["total_lines"].as_u64().expect("total_lines") {
            return text;
        }
        offset = next;
    }
}

/// Issue 11, finding 5: `echo FATAL >&2; printf '\e[1A\e[2K…'` left only
/// "all 120 tests passed" in the reply, the full output and `output`.
#[tokio::test]
async fn an_erased_error_line_is_found_everywhere() {
    let server = Server::with(&["--output-cap", "200"]).await;
    let repro = "echo 'FATAL: 3 tests FAILED' >&2; \
                 printf '\\e[1A\\e[2K\\e[1A\\e[2Kall 120 tests passed\\n'; true";
    let r = server.terminal(json!({"command": repro})).await;
    assert_eq!(r.output(), "FATAL: 3 tests FAILED\nall 120 tests passed\n", "{r:#?}");
    assert_eq!(r["exit_code"], 0);
    assert!(r.text.contains("FATAL: 3 tests FAILED"), "{}", r.text);
    assert_eq!(read_all(&server).await, "FATAL: 3 tests FAILED\nall 120 tests passed\n");

    // Buried in a long output that the reply cuts: the full output file and
    // `output` still have it. Here the second cursor up reaches the line
    // before it (`500`), which "all 120 tests passed" replaces: both erased
    // lines are kept where they stood, `500` above its replacement, the
    // FATAL line, left blank, below it.
    let r = server.terminal(json!({"command": format!("seq 1 500; {repro}; seq 501 1000")})).await;
    assert_eq!(r["truncated"], true, "{r:#?}");
    let expected: String = (1..=500).map(|n| format!("{n}\n")).collect::<String>()
        + "all 120 tests passed\nFATAL: 3 tests FAILED\n"
        + &(501..=1000).map(|n| format!("{n}\n")).collect::<String>();
    let full = r["full_output_path"].as_str().expect("the output was cut");
    let full = std::fs::read_to_string(full).expect("read the full output");
    let at = full.bytes().zip(expected.bytes()).position(|(a, b)| a != b).unwrap_or(0);
    let around = &full[at.saturating_sub(60)..(at + 100).min(full.len())];
    assert!(full == expected, "differs at {at}: {around:?}");
    assert_eq!(read_all(&server).await, expected);

    // Overwritten after `\r`, and erased with nothing printed after it.
    let r = server
        .terminal(json!({"command": "echo 'error: linker failed'; printf '\\e[A\\rBuild finished         \\n'"}))
        .await;
    assert_eq!(r.output(), "error: linker failed\nBuild finished\n", "{r:#?}");
    let r = server.terminal(json!({"command": "echo 'FATAL: gone'; printf '\\e[A\\e[2K'"})).await;
    assert_eq!(r.output(), "FATAL: gone\n", "{r:#?}");
    assert_eq!(read_all(&server).await, "FATAL: gone\n");
}

/// Issue 11: progress displays keep their final frame: the output does not
/// grow with the number of frames.
#[tokio::test]
async fn progress_displays_do_not_grow_with_their_frames() {
    let server = Server::start().await;
    // `pip`-style: one line, `\r` before each frame.
    let pip = |frames: u32| {
        format!(
            "echo 'Downloading numpy (20.0 MB)'; for i in $(seq 0 {frames}); do \
             printf '\\r   %s %d/{frames} kB' \"$(printf '%*s' $((i * 30 / {frames})) '' | tr ' ' '#')\" $i; done; echo"
        )
    };
    // `docker pull`-style: one line per layer, redrawn with cursor up,
    // erase-line and cursor down.
    let docker = |frames: u32| {
        format!(
            "printf 'a3ed95caeb02: Pulling fs layer\\n4f4fb700ef54: Pulling fs layer\\n'; \
             for i in $(seq 1 {frames}); do \
               printf '\\e[2A\\e[2K\\ra3ed95caeb02: Downloading %d/{frames}\\r\\e[2B' $i; \
               printf '\\e[1A\\e[2K\\r4f4fb700ef54: Extracting %d/{frames}\\r\\e[1B' $i; \
             done; \
             printf '\\e[2A\\e[2K\\ra3ed95caeb02: Pull complete\\r\\e[2B'; \
             printf '\\e[1A\\e[2K\\r4f4fb700ef54: Pull complete\\r\\e[1B'; echo 'Status: done'"
        )
    };
    let few = server.terminal(json!({"command": pip(10)})).await;
    let many = server.terminal(json!({"command": pip(3000)})).await;
    assert_eq!(
        few.output(),
        "Downloading numpy (20.0 MB)\n   ############################## 10/10 kB\n"
    );
    assert_eq!(many.output(), few.output().replace("10/10", "3000/3000"));
    assert_eq!(read_all(&server).await, many.output());

    let expected = "a3ed95caeb02: Pull complete\n4f4fb700ef54: Pull complete\nStatus: done\n";
    for frames in [5, 3000] {
        let r = server.terminal(json!({"command": docker(frames)})).await;
        assert_eq!(r.output(), expected, "{frames} frames: {r:#?}");
        assert_eq!(r["truncated"], false);
        assert_eq!(read_all(&server).await, expected);
    }
}

/// Issue 11, finding 5: an unterminated OSC (`printf '\e]8;;'`) swallowed
/// all later text of the command.
#[tokio::test]
async fn an_unterminated_escape_sequence_hides_nothing() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "printf '\\e]8;;'; echo done"})).await;
    assert_eq!(r.output(), "]8;;done\n", "{r:#?}");
    assert_eq!(read_all(&server).await, "]8;;done\n");
    for (open, shown) in [("\\eP", "P"), ("\\e_", "_"), ("\\e^", "^"), ("\\eX", "X")] {
        let command = format!("printf '{open}'; echo 42 done; echo FATAL");
        let r = server.terminal(json!({"command": command})).await;
        assert_eq!(r.output(), format!("{shown}42 done\nFATAL\n"), "{r:#?}");
    }
    // A CSI sequence ends at its first letter: numbers are what it hid.
    let r = server.terminal(json!({"command": "printf '\\e['; seq 1 3; echo FATAL"})).await;
    assert_eq!(r.output(), "[1\n2\n3\nFATAL\n", "{r:#?}");
    // Open at the very end: the end of the command abandons it.
    let r = server.terminal(json!({"command": "echo ok; printf '\\e]0;FATAL: last words'"})).await;
    assert_eq!(r.output(), "ok\n]0;FATAL: last words", "{r:#?}");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(read_all(&server).await, "ok\n]0;FATAL: last words");
    // And the next command is not affected.
    let r = server.terminal(json!({"command": "echo after"})).await;
    assert_eq!(r.output(), "after\n");
}

/// Issue 11, finding 5: `printf '\e[?1049h'; echo FIRST; seq 1 100000`
/// kept no `FIRST` anywhere.
#[tokio::test]
async fn what_scrolls_off_a_full_screen_view_is_kept() {
    let server = Server::start().await;
    let r = server
        .terminal(
            json!({"command": "printf '\\e[?1049h'; echo FIRST; seq 1 100000", "timeout": 120}),
        )
        .await;
    // On a busy machine the lines come slowly enough to look like a
    // program redrawing its screen: the call hands back the screen, and
    // the command ends in a later one.
    let r = if r["status"] == "running" {
        poll_until(
            Duration::from_secs(120),
            async || server.terminal(json!({"command": "", "timeout": 10})).await,
            |r| r["status"] != "running",
        )
        .await
    } else {
        assert!(r.output().starts_with("FIRST\n1\n2\n"), "{r:#?}");
        let expected: String = std::iter::once("FIRST\n".to_owned())
            .chain((1..=100_000).map(|n| format!("{n}\n")))
            .collect();
        let full = r["full_output_path"].as_str().expect("the output was cut");
        assert_eq!(std::fs::read_to_string(full).expect("read the full output"), expected);
        r
    };
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert!(r.output().ends_with("\n100000\n"), "{r:#?}");
    let head = server.call("output", json!({"offset": 0, "limit": 3})).await;
    assert_eq!(head["lines"], "FIRST\n1\n2\n", "{head:#?}");
    let tail = server.call("output", json!({"offset": -2})).await;
    assert_eq!(tail["lines"], "99999\n100000\n", "{tail:#?}");

    // A program that redraws in place commits nothing per frame.
    let r = server
        .terminal(json!({"command": "printf '\\e[?1049h'; for i in $(seq 1 500); do printf '\\e[H\\e[2Jload %d\\e[2;1HPID USER' $i; done"}))
        .await;
    assert_eq!(r.output(), "load 500\nPID USER\n", "{r:#?}");
    assert_eq!(read_all(&server).await, "load 500\nPID USER\n");
}

/// Issue 14: the terminal is 120 columns wide by default (`--columns`
/// changes it): what programs size their lines by says so, a separator
/// drawn to the width is 120 characters, a longer line comes back whole,
/// and no line of a reply carries padding to the width.
#[tokio::test]
async fn the_width_fits_the_reader_and_nothing_is_padded() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "tput cols; echo $COLUMNS; stty size"})).await;
    assert_eq!(r.output(), "120\n120\n50 120\n", "{r:#?}");
    // pytest draws its separators to the width: they are text, not padding.
    let r = server.terminal(json!({"command": "printf '=%.0s' $(seq $(tput cols)); echo"})).await;
    assert_eq!(r.output(), format!("{}\n", "=".repeat(120)), "{r:#?}");
    // A line wider than the terminal comes back as the one line it is.
    let r = server.terminal(json!({"command": "printf '%-200s|\\n' x"})).await;
    assert_eq!(r.output(), format!("x{}|\n", " ".repeat(199)), "{r:#?}");
    // Padding after the text (a status line, a `man` page) is dropped.
    let r = server.terminal(json!({"command": "printf 'x%300s\\nstatus%114s\\n' '' ''"})).await;
    assert_eq!(r.output(), "x\nstatus\n", "{r:#?}");
    // A full-screen program's screen: its padded status line is trimmed.
    let command = "printf '\\e[?1049h\\e[H~\\e[50;1H\\e[7m\"f.txt\" 1L%110s\\e[0m' ''; read -rsn1; \
                   printf '\\e[?1049l'";
    let r = server.terminal(json!({"command": command, "timeout": 10})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let screen = r.output();
    assert!(screen.ends_with("\"f.txt\" 1L"), "{screen:?}");
    assert!(screen.lines().all(|line| !line.ends_with(' ')), "{screen:?}");
    assert!(r.text.lines().all(|line| line.chars().count() <= 300), "{}", r.text);
    let r = server.terminal(json!({"command": "q", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");

    let narrow = Server::with(&["--columns", "80", "--rows", "24"]).await;
    let r = narrow.terminal(json!({"command": "tput cols; tput lines"})).await;
    assert_eq!(r.output(), "80\n24\n", "{r:#?}");
}

/// Issue 14: a real full-screen program in the 120-column terminal: its
/// screen comes back with no line padded to the width and no line wider
/// than it, and the waiting notice points at the screen, not at a prompt.
#[tokio::test]
async fn a_full_screen_program_fits_the_width_unpadded() {
    if !crate::installed("vim") {
        return;
    }
    let server = Server::start().await;
    std::fs::write(server.cwd().join("f.txt"), "hello\n").expect("write the file");
    let r = server.terminal(json!({"command": "vim -u NONE -N f.txt", "timeout": 10})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let screen = r.output();
    assert!(screen.starts_with("hello\n~"), "{screen:?}");
    assert!(screen.contains("\"f.txt\""), "the status line: {screen:?}");
    for line in screen.lines() {
        assert!(!line.ends_with(' ') && line.chars().count() <= 120, "{line:?}");
    }
    assert!(r.text.contains("waits for input on the screen above"), "{}", r.text);
    assert!(!r.text.contains("last line above"), "{}", r.text);
    let r = server.terminal(json!({"command": ":q!", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}

/// Issue 18: a TUI list's selected row was invisible (reverse video was
/// dropped), so after DOWN the reply was the one before. A curses menu
/// that shows its selection in reverse video (`j` moves it down, `q`
/// picks): the selected row starts with `▶ `, and the mark follows it.
#[tokio::test]
async fn a_full_screens_selected_item_is_marked() {
    let server = Server::start().await;
    let menu = "import curses\n\
                items = ['apples', 'pears', 'plums']\n\
                def main(window):\n    \
                    selected = 0\n    \
                    while True:\n        \
                        window.erase()\n        \
                        window.addstr(0, 0, 'Pick a fruit (j: down, q: pick)')\n        \
                        for n, item in enumerate(items):\n            \
                            window.addstr(2 + n, 2, item, curses.A_REVERSE if n == selected else 0)\n        \
                        window.refresh()\n        \
                        key = window.getch()\n        \
                        if key == ord('q'):\n            \
                            return items[selected]\n        \
                        if key == ord('j'):\n            \
                            selected = (selected + 1) % len(items)\n\
                print('picked', curses.wrapper(main))\n";
    std::fs::write(server.cwd().join("menu.py"), menu).expect("write the menu");
    let r = server.terminal(json!({"command": "python3 menu.py", "timeout": 10})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    assert!(r.output().contains("▶   apples\n  pears\n  plums"), "{r:#?}");
    let r = server.terminal(json!({"command": "j", "is_input": true, "timeout": 5})).await;
    let r = if r.output().contains("▶   pears") {
        r
    } else {
        server.terminal(json!({"command": "", "timeout": 2})).await
    };
    assert!(r.output().contains("  apples\n▶   pears\n  plums"), "{r:#?}");
    let r = server.terminal(json!({"command": "q", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    // Leaving the full screen keeps its last screen (issue 19: nothing
    // printed there is hidden), once, before what came after.
    assert_eq!(
        r.output(),
        "Pick a fruit (j: down, q: pick)\n\n  apples\n▶   pears\n  plums\npicked pears\n"
    );

    // `ncdu` shows its selected entry in reverse video too (`j` is down).
    if !installed("ncdu") {
        eprintln!("ncdu's selection is not tested: ncdu is not installed");
        return;
    }
    let dir = server.cwd().join("sizes");
    std::fs::create_dir_all(&dir).expect("a directory to scan");
    for (name, size) in [("big", 400_000), ("medium", 40_000), ("small", 4_000)] {
        std::fs::write(dir.join(name), vec![b'x'; size]).expect("write a file");
    }
    let r = server.terminal(json!({"command": "ncdu sizes", "timeout": 10})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let selected = |screen: &str| -> Vec<String> {
        screen.lines().filter(|line| line.starts_with("▶ ")).map(str::to_owned).collect()
    };
    let rows = selected(r.output());
    assert!(rows.iter().any(|row| row.contains("big")), "{r:#?}");
    let r = server.terminal(json!({"command": "j", "is_input": true, "timeout": 5})).await;
    let r = if selected(r.output()).iter().any(|row| row.contains("medium")) {
        r
    } else {
        server.terminal(json!({"command": "", "timeout": 2})).await
    };
    assert!(selected(r.output()).iter().any(|row| row.contains("medium")), "{r:#?}");
    assert!(!selected(r.output()).iter().any(|row| row.contains("big")), "{r:#?}");
    let r = server.terminal(json!({"command": "q", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}

/// Issue 18: lines were never wrapped at the window's width, so a program
/// that moves up over a line it knows has wrapped landed a row too high
/// (`uv` lost its `Built app @ …` line and put lines out of order). Through
/// the real binary, in its 120-column terminal: the rows land where the
/// program means, and a wrapped line comes back as one line.
#[tokio::test]
async fn lines_wrap_at_the_terminals_width() {
    let server = Server::start().await;
    let r = server
        .terminal(
            json!({"command": "printf 'first\\n%-120sX\\e[1A\\r\\e[2KREPLACED\\n\\nend\\n' AAAA"}),
        )
        .await;
    // What a terminal shows, and the erased row of `A`s above what replaced
    // it (output cannot hide output).
    assert_eq!(r.output(), "first\nAAAA\nREPLACED\nX\nend\n", "{r:#?}");
    let r = server
        .terminal(json!({"command": "echo 'Resolved 5 packages'; printf '%-120s%-120s' 'Building app' 'Preparing 0/5'; \
                                     printf '\\e[1A\\r\\e[2K\\e[1B\\r\\e[2K\\e[1A'; \
                                     printf '%-120s%-120s' 'Built app' 'Preparing 1/5'; \
                                     printf '\\r\\e[2KPrepared 5 packages\\n'"}))
        .await;
    assert_eq!(r.output(), "Resolved 5 packages\nBuilt app\nPrepared 5 packages\n", "{r:#?}");
    let r = server.terminal(json!({"command": "head -c 250 /dev/zero | tr '\\0' z; echo"})).await;
    assert_eq!(r.output(), format!("{}\n", "z".repeat(250)), "{r:#?}");
}

/// Issue 19 (F13): a command cannot hide a line by printing it on the
/// alternate screen and leaving (`?47`, `?1047`, `?1049`), nor by a full
/// reset there: the reply and the `output` tool (which reads the log) keep
/// it, before what comes after.
#[tokio::test]
async fn no_way_onto_the_alternate_screen_hides_a_line() {
    let server = Server::start().await;
    let hides = [
        "printf '\\e[?47h'; echo FATAL; printf '\\e[?47l'; echo ok",
        "printf '\\e[?1047h'; echo FATAL; printf '\\e[?1047l'; echo ok",
        "printf '\\e[?1049h'; echo FATAL; printf '\\e[?1049l'; echo ok",
        "printf '\\e[?1049h'; echo FATAL; printf '\\ec'; echo ok",
    ];
    for (n, command) in hides.iter().enumerate() {
        let r = server.terminal(json!({"command": command})).await;
        assert_eq!(r["status"], "completed", "{command}: {r:#?}");
        let output = r.output();
        assert!(output.contains("FATAL\n"), "{command}: {output:?}");
        assert!(output.ends_with("ok\n"), "{command}: {output:?}");
        let page = server.call("output", json!({"command": n + 1})).await;
        let lines = page["lines"].as_str().expect("lines");
        assert!(lines.contains("FATAL\n") && lines.ends_with("ok\n"), "{command}: {page:#?}");
    }
}
