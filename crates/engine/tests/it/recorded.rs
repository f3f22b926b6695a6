//! The renderer against recorded byte streams of real programs (`vim`,
//! `htop`, `cargo build`, `pip install`, `git log -p` through `less`), each
//! an asciicast in `tests/fixtures` made by `tests/fixtures/record.py` on a
//! terminal of the engine's size.
//!
//! For: what a session would show of each program (the text it commits and,
//! whenever keys were typed, the full-screen program's screen or the line
//! at the cursor) against an expected text beside the recording, which a
//! person checked by eye (`UPDATE_EXPECT=1` rewrites it after a new
//! recording or a change of renderer). Not for: the session's commands,
//! markers or replies (`screen.rs`). Invariant held: how the bytes are cut
//! into reads never changes what is shown, so each recording is also fed a
//! byte at a time and in two pieces at many split points.

use std::path::Path;

use expect_test::{ExpectFile, expect_file};
use shellkeep_engine::Screen;

/// The engine's terminal size (`SessionConfig::default`), which the
/// recordings were made at.
const ROWS: u16 = 50;
/// See [`ROWS`].
const COLS: u16 = 120;

/// How many split points each recording is fed at in two pieces: one in
/// each of as many equal stretches of it, at a different place in each (a
/// split inside an escape sequence, a character, a line). Each costs a
/// whole render, milliseconds in a debug build: every split point of a
/// 6 KB recording took over a minute. Feeding a recording a byte at a time
/// splits it at every point at once.
const SPLITS: usize = 256;

/// Keys typed during a recording, and where in its output they were typed.
struct Typed {
    /// Bytes of output before the keys.
    at: usize,
    /// The keys.
    keys: String,
}

/// A recording: what the program printed, and the keys typed into it.
struct Recording {
    /// Every byte of output, in order.
    output: Vec<u8>,
    /// The keys, in order.
    typed: Vec<Typed>,
}

/// Reads the asciicast `tests/fixtures/{name}.cast`: checks that it is
/// version 2 at the engine's size, and joins its output events.
fn recording(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.cast"));
    let text = std::fs::read_to_string(&path).expect("the recording is there");
    let mut lines = text.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("a header")).expect("the header is JSON");
    assert_eq!(header["version"], 2, "{name}: asciicast version");
    let size = (header["width"].as_u64(), header["height"].as_u64());
    assert_eq!(size, (Some(u64::from(COLS)), Some(u64::from(ROWS))), "{name}: terminal size");
    let mut recording = Recording { output: Vec::new(), typed: Vec::new() };
    for line in lines {
        let (_, code, data): (f64, String, String) =
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{name}: {line}: {err}"));
        match code.as_str() {
            "o" => recording.output.extend_from_slice(data.as_bytes()),
            "i" => recording.typed.push(Typed { at: recording.output.len(), keys: data }),
            other => panic!("{name}: an event of unknown kind {other:?}"),
        }
    }
    recording
}

/// What a session shows of `recording` when its output arrives in reads
/// that end at `cuts` (sorted byte offsets): the committed text as it
/// comes, and, at each moment keys were typed, the full-screen program's
/// screen, or the line at the cursor when none shows; at the end, what a
/// command's end commits.
fn shown(recording: &Recording, cuts: &[usize]) -> String {
    let mut screen = Screen::new(ROWS, COLS, "n0nce");
    let mut view = View::default();
    let mut typed = recording.typed.iter().peekable();
    let mut from = 0;
    let ends = cuts.iter().copied().chain([recording.output.len()]);
    for end in ends {
        // Keys typed inside this read cut it where they were typed.
        while let Some(keys) = typed.next_if(|keys| keys.at <= end) {
            feed(&mut screen, &recording.output[from..keys.at], &mut view);
            from = keys.at;
            view.keys_typed(&screen, &keys.keys);
        }
        feed(&mut screen, &recording.output[from..end], &mut view);
        from = end;
    }
    screen.commit_all();
    screen.leave_alternate();
    view.committed.push_str(&screen.take_committed());
    view.section("at the end");
    view.text
}

/// Feeds `bytes` as one read, as the session does: again after each stop
/// (a marker, a switch of screen), taking the committed text.
fn feed(screen: &mut Screen, mut bytes: &[u8], view: &mut View) {
    while !bytes.is_empty() {
        let (consumed, _) = screen.feed(bytes);
        bytes = &bytes[consumed..];
        view.committed.push_str(&screen.take_committed());
    }
}

/// What was shown so far, as sections of text.
#[derive(Default)]
struct View {
    /// The finished sections.
    text: String,
    /// Text committed since the last section.
    committed: String,
}

impl View {
    /// Ends a section of committed text, if any, headed `when`.
    fn section(&mut self, when: &str) {
        if !self.committed.is_empty() {
            let committed = std::mem::take(&mut self.committed);
            self.text.push_str(&format!("── committed, {when} ──\n{committed}"));
        }
    }

    /// Notes what a person saw when typing `keys`: the text committed
    /// before, then the full screen, or the line the cursor is on.
    fn keys_typed(&mut self, screen: &Screen, keys: &str) {
        self.section(&format!("before {keys:?}"));
        let (what, text) = match screen.alternate_contents() {
            Some(contents) => ("the screen", contents),
            None => ("the line at the cursor", screen.current_line()),
        };
        self.text.push_str(&format!("── {what}, when {keys:?} was typed ──\n{text}\n"));
    }
}

/// The [`SPLITS`] points a recording of `len` bytes is fed at, in two
/// pieces each: all of them when it is that short; otherwise one in each
/// of as many equal stretches, at an offset in it drawn by a fixed
/// xorshift generator, so the same points are tried on every run.
fn split_points(len: usize) -> Vec<usize> {
    if len <= SPLITS {
        return (1..len).collect();
    }
    let stretch = len / SPLITS;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % stretch as u64).expect("below a usize")
    };
    (0..SPLITS).map(|n| (n * stretch + next()).max(1)).collect()
}

/// Fails the test at the first line where `got` differs from `expected`.
fn same(name: &str, how: &str, got: &str, expected: &str) {
    if got == expected {
        return;
    }
    let mismatch = got.lines().zip(expected.lines()).position(|(a, b)| a != b);
    let line = mismatch.unwrap_or(got.lines().count().min(expected.lines().count()));
    let around = |text: &str| {
        text.lines().skip(line.saturating_sub(2)).take(5).map(str::to_owned).collect::<Vec<_>>()
    };
    panic!(
        "{name}, {how}: differs from line {}:\n got: {:#?}\nwhole: {:#?}",
        line + 1,
        around(got),
        around(expected)
    );
}

/// Checks the recording `name` against `expected`, fed whole, a byte at a
/// time and in two pieces at each of [`split_points`].
fn check(name: &str, expected: ExpectFile) {
    let recording = recording(name);
    let whole = shown(&recording, &[]);
    expected.assert_eq(&whole);
    let bytes: Vec<usize> = (1..recording.output.len()).collect();
    same(name, "a byte at a time", &shown(&recording, &bytes), &whole);
    for cut in split_points(recording.output.len()) {
        same(name, &format!("cut at byte {cut}"), &shown(&recording, &[cut]), &whole);
    }
}

/// vim: a file opened, a line added, a search, a word deleted, `:wq`. Each
/// screen is vim's; leaving it keeps the last one.
#[test]
fn vim() {
    check("vim", expect_file!["../fixtures/vim.txt"]);
}

/// htop, showing one process: its screen, its help screen, then `q`.
#[test]
fn htop() {
    check("htop", expect_file!["../fixtures/htop.txt"]);
}

/// `cargo build` with its progress bar over `Compiling` lines, and a
/// warning: the bar's frames are gone, the lines stay.
#[test]
fn cargo_build() {
    check("cargo-build", expect_file!["../fixtures/cargo-build.txt"]);
}

/// `pip install` with its download bar and a warning: only the bar's last
/// frame stays.
#[test]
fn pip_install() {
    check("pip-install", expect_file!["../fixtures/pip-install.txt"]);
}

/// `git log -p` paged by less with git's defaults (`LESS=FRX`: on the
/// normal screen), a page down, a search, the next match, `q`. The
/// expected text is not yet what a terminal shows: less redraws its page
/// in place for the search (cursor to the top row, each row rewritten),
/// and the renderer keeps the rows it overwrote, so part of the second
/// page comes back twice, once with rows of the next commit mixed in;
/// tmux shows each line once.
#[test]
fn git_log_through_less() {
    check("git-log-less", expect_file!["../fixtures/git-log-less.txt"]);
}
