//! Rendering the bytes a PTY produces into the text a person would read.
//!
//! For: a window of recent rows that programs can still change (`\r`,
//! erasing, cursor movement, a pager repainting its page by row), whose
//! rows become committed text as they leave it, as a row scrolling off a
//! terminal can no longer change; lines wrapped as xterm and tmux wrap
//! them and committed whole; full-screen programs (the alternate screen)
//! drawn by `vt100` and shown as their screen; stopping right after each
//! shell marker, and queuing the answers to terminal queries for the
//! caller. Not for: commands or sessions, and it never reads or writes
//! anything itself; colours and attributes are dropped.
//!
//! Invariants held: output cannot hide output (committed text, what every
//! reader of a command's output sees, keeps what a person could have
//! seen: see `Held`, `Line`, `Renderer` and `Alternate`), and the memory
//! held is bounded by the window, never by the input
//! ([`Screen::window_bound`]).

use std::collections::VecDeque;
use std::ops::Range;

use unicode_width::UnicodeWidthChar;
use vte::{Params, Perform};

use crate::keys::CursorKeys;

/// What starts a highlighted row of a full-screen view: one with text in
/// reverse video or on a background colour other than the screen's usual
/// one, the way TUIs show the selected item of a list or menu (`htop`,
/// `ncdu`, curses menus) and their title and status bars. Colours and
/// attributes are dropped, so without it the selection would be
/// invisible. It is a whole row's mark, never inside the row's text, so it
/// splits no word (and no secret a mask must find).
pub const HIGHLIGHT_MARK: &str = "▶ ";

/// The OSC number our shell markers use. Real terminals ignore unknown OSC
/// numbers, so the markers are invisible to a person watching.
pub(crate) const MARKER_OSC: &str = "6973";

/// Bytes of one control string (OSC, DCS, SOS, PM, APC) held until it
/// ends: a marker is under 100 bytes, a hyperlink a few hundred, a chunk
/// of the kitty graphics protocol about 4 KiB. A longer one is abandoned
/// and shown as text.
pub(crate) const STRING_LIMIT: usize = 16 * 1024;

/// Bytes of one CSI sequence, `ESC [` included, held until its final byte:
/// at most 32 parameters make a real one about 200 bytes. A longer one is
/// abandoned and shown as text.
pub(crate) const CSI_LIMIT: usize = 256;

/// Bytes of an escape sequence with intermediates (`ESC ( B`).
const ESCAPE_LIMIT: usize = 16;

/// Bytes of erased versions of lines the window keeps (beyond one line per
/// row) before it commits itself whole.
pub(crate) const KEPT_LIMIT: usize = 64 * 1024;

/// Bytes of answers to terminal queries kept until the caller takes them.
pub(crate) const RESPONSE_LIMIT: usize = 1024;

/// Bytes of extra characters (combining marks, joiners, variation
/// selectors) one cell holds; a further one takes a cell of its own.
const CLUSTER_BYTES: usize = 16;

/// Cells of one line that may hold extra characters.
const LINE_CLUSTERS: usize = 256;

/// A marker emitted by the shell integration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// A command with this sequence number is about to run.
    Start {
        /// The command's sequence number.
        seq: u64,
        /// The shell's own count of the command lines it has read, this
        /// one included (bash's `\#`), when the marker carries it.
        lines_read: Option<u64>,
    },
    /// The shell is back at its prompt after the command with this sequence
    /// number, which exited with `status`.
    End {
        /// The command's sequence number.
        seq: u64,
        /// The exit status bash reported (`$?`).
        status: i32,
    },
    /// The shell printed its prompt while the command with this sequence
    /// number ran, and nothing of the integration ended it: `PS1` holds
    /// this marker only while a command runs, and the integration's prompt
    /// empties `PS1` before bash prints it.
    Prompt {
        /// The command's sequence number.
        seq: u64,
    },
    /// The shell edits lines again for a person (`__sk_edit` ran): the
    /// echo of the line that asked it is over.
    Editing,
}

/// Why [`Screen::feed`] stopped before the end of its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A marker with our nonce.
    Marker(Marker),
    /// A program switched to or from the alternate screen.
    AlternateScreen(bool),
}

/// The terminal renderer: feed it bytes, take committed text out.
pub struct Screen {
    parser: vte::Parser,
    /// The escape sequence read but not yet handed to the parsers.
    held: Held,
    /// The beginning of a UTF-8 character whose other bytes have not come
    /// yet: the parsers only ever see whole characters (`vte` 0.15 can drop
    /// the character after one it completes from two pieces).
    partial: Partial,
    state: Renderer,
}

impl Screen {
    /// A renderer for a terminal of `rows` by `cols` that accepts markers
    /// carrying `nonce`.
    pub fn new(rows: u16, cols: u16, nonce: &str) -> Screen {
        Screen {
            parser: vte::Parser::new(),
            held: Held::default(),
            partial: Partial::default(),
            state: Renderer {
                rows: usize::from(rows.max(2)),
                // `vt100` panics on a character wider than the screen (U+17D8
                // is three columns wide).
                cols: usize::from(cols.max(4)),
                nonce: nonce.as_bytes().to_vec(),
                lines: VecDeque::from([Line::default()]),
                row: 0,
                col: 0,
                autowrap: true,
                saved_cursor: (0, 0),
                overlay: false,
                last_printed: None,
                committed: String::new(),
                alternate: None,
                pause: None,
                in_command: false,
                responses: Vec::new(),
                cursor_keys: CursorKeys::Normal,
                after_line: After::default(),
            },
        }
    }

    /// Processes `bytes` until the end or until a marker or a screen switch
    /// has been read; returns how many bytes were consumed and why it
    /// stopped early. Call again with the rest.
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Stop>) {
        let mut done = 0;
        while done < bytes.len() {
            let rest = &bytes[done..];
            if self.held.is_empty() {
                // Text and controls go to the parsers as they come, up to
                // the next escape sequence.
                let text = memchr::memchr(0x1b, rest).unwrap_or(rest.len());
                if text == 0 {
                    self.end_partial();
                    self.held.start();
                    done += 1;
                    continue;
                }
                let (consumed, stop) = self.forward_text(&rest[..text]);
                done += consumed;
                if stop.is_some() {
                    return (done, stop);
                }
                continue;
            }
            let byte = rest[0];
            match self.held.step(byte) {
                Step::Hold => done += 1,
                Step::Drop => {
                    self.held.clear();
                    done += 1;
                }
                Step::Complete => {
                    done += 1;
                    let sequence = std::mem::take(&mut self.held.bytes);
                    let stop = if self.held.forwards() { self.forward(&sequence).1 } else { None };
                    self.held.bytes = sequence;
                    self.held.clear();
                    if stop.is_some() {
                        return (done, stop);
                    }
                }
                Step::Abandon { escape } => {
                    // The byte is read again, as text or as what it starts.
                    self.abandon();
                    if escape {
                        self.held.start();
                    }
                }
            }
        }
        (done, None)
    }

    /// Shows the held escape sequence, if any, as text: its bytes after the
    /// ESC.
    fn abandon(&mut self) {
        let sequence = std::mem::take(&mut self.held.bytes);
        if sequence.len() > 1 {
            // Text and controls other than ESC, CAN and SUB: nothing in it
            // can pause the parsers.
            let (consumed, stop) = self.forward_text(&sequence[1..]);
            debug_assert!(consumed == sequence.len() - 1 && stop.is_none());
        }
        self.held.bytes = sequence;
        self.held.clear();
    }

    /// Hands text to the parsers, keeping back an unfinished UTF-8
    /// character at its end, and completing the one kept back before.
    fn forward_text(&mut self, bytes: &[u8]) -> (usize, Option<Stop>) {
        let mut done = 0;
        if self.partial.len > 0 {
            done = self.partial.extend(bytes);
            if self.partial.len < self.partial.need && done == bytes.len() {
                return (done, None);
            }
            self.end_partial();
        }
        let rest = &bytes[done..];
        let tail = Partial::unfinished_tail(rest);
        let (consumed, stop) = self.forward(&rest[..rest.len() - tail]);
        done += consumed;
        if stop.is_none() && tail > 0 {
            self.partial.start(&rest[rest.len() - tail..]);
            done += tail;
        }
        (done, stop)
    }

    /// Hands the character kept back to the parsers: whole, or, if what
    /// followed it cannot finish it, as the replacement character a
    /// terminal shows for it.
    fn end_partial(&mut self) {
        if self.partial.len == 0 {
            return;
        }
        let partial = std::mem::take(&mut self.partial);
        let bytes = &partial.bytes[..partial.len];
        let whole = partial.len == partial.need;
        self.forward(if whole { bytes } else { "\u{fffd}".as_bytes() });
    }

    /// Hands `bytes` (whole sequences, or text) to the parsers, and to the
    /// full-screen emulator while one is showing, until the end or a stop.
    fn forward(&mut self, bytes: &[u8]) -> (usize, Option<Stop>) {
        let mut done = 0;
        while done < bytes.len() {
            let rest = &bytes[done..];
            let consumed = self.parser.advance_until_terminated(&mut self.state, rest);
            let pause = self.state.pause.take();
            if let Some(alternate) = &mut self.state.alternate {
                // The alternate screen sees every byte it was active for,
                // including the sequence that ends it.
                match &pause {
                    Some(Pause::Oversized(replacement)) => {
                        // The consumed bytes end with the oversized
                        // sequence's final byte: finish it as one the
                        // emulator ignores, then send it clamped.
                        alternate.process(&rest[..consumed - 1]);
                        alternate.process(b"q");
                        alternate.process(replacement.as_bytes());
                    }
                    // Everything but the reset itself (`ESC c`, whole:
                    // sequences reach here whole), which would clear the
                    // screen before it is kept.
                    Some(Pause::Reset) => alternate.process(&rest[..consumed.saturating_sub(2)]),
                    _ => alternate.process(&rest[..consumed]),
                }
                self.state.commit_scrolled_off();
            }
            done += consumed;
            match pause {
                None | Some(Pause::Oversized(_)) => {}
                Some(Pause::CursorQuery) => self.state.answer_cursor_position(),
                Some(Pause::Reset) => {
                    self.leave_alternate();
                    return (done, Some(Stop::AlternateScreen(false)));
                }
                Some(Pause::Stop(stop)) => {
                    if let Stop::AlternateScreen(on) = stop {
                        // Leaving keeps what the view last showed: text a
                        // terminal wipes on leaving is still text the
                        // command printed, and nothing printed is hidden.
                        self.leave_alternate();
                        let (rows, cols) = (self.state.rows, self.state.cols);
                        self.state.alternate = on.then(|| Alternate::new(rows, cols));
                    }
                    return (done, Some(stop));
                }
            }
        }
        (done, None)
    }

    /// Text that is final: lines that left the window, and whatever
    /// [`Screen::commit_all`] or [`Screen::commit_complete_lines`] committed.
    pub fn take_committed(&mut self) -> String {
        std::mem::take(&mut self.state.committed)
    }

    /// Whether committed text is waiting to be taken.
    pub fn has_committed(&self) -> bool {
        !self.state.committed.is_empty()
    }

    /// The answers to terminal queries (cursor position, device attributes)
    /// read so far, for the caller to write to the terminal. Only queries
    /// made while a command runs (between its start and end markers) are
    /// answered: at the prompt, an answer would be typed into the shell.
    /// At most [`RESPONSE_LIMIT`] bytes are kept.
    pub fn take_responses(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.state.responses)
    }

    /// Abandons an escape sequence left open (its bytes are text), then
    /// commits every line in the window, the unfinished last one and the
    /// erased versions kept included, and starts afresh: used when a
    /// command ends (or the shell does).
    pub fn commit_all(&mut self) {
        if !self.held.is_empty() {
            self.abandon();
        }
        self.end_partial();
        self.state.commit_lines(self.state.lines.len(), true);
    }

    /// Commits the finished lines of the window, leaving the line the cursor
    /// is on (which a progress bar may still rewrite): used when a reply goes
    /// out while a command is still running.
    pub fn commit_complete_lines(&mut self) {
        let n = self.state.line_start(self.state.row);
        self.state.commit_lines(n, false);
    }

    /// Drops the window without committing it: used for the echo of the
    /// line we type to start a command.
    pub fn discard_window(&mut self) {
        self.state.after_line.flush(&mut self.state.committed);
        self.state.lines.truncate(1);
        self.state.lines[0].reset();
        self.state.row = 0;
        self.state.col = 0;
        self.state.saved_cursor = (0, 0);
        self.state.overlay = false;
    }

    /// The line the cursor is on, as it looks now (not committed): the
    /// rows that wrapped onto the cursor's row and that row up to the
    /// cursor at least, so a prompt keeps its trailing space. At most the
    /// window's cells: the beginning of a longer line is already committed.
    pub fn current_line(&self) -> String {
        let state = &self.state;
        let mut text = String::new();
        state.write_line(state.line_start(state.row), state.row, &mut text);
        let Some(line) = state.lines.get(state.row) else { return text };
        let end = line.trimmed_len().max(state.col.min(line.len()));
        line.write(0..end, &mut text);
        text
    }

    /// The last line in the window with text on it, at or above the cursor,
    /// as it looks now (its wrapped rows joined); empty when there is none.
    /// For progress messages.
    pub fn newest_line(&self) -> String {
        let state = &self.state;
        let mut end = (state.row + 1).min(state.lines.len());
        while end > 0 {
            let start = state.line_start(end - 1);
            let mut text = String::new();
            state.write_line(start, end, &mut text);
            if !text.trim().is_empty() {
                return text.trim_end().to_owned();
            }
            end = start;
        }
        String::new()
    }

    /// A full-screen program is showing the alternate screen.
    pub fn is_alternate(&self) -> bool {
        self.state.alternate.is_some()
    }

    /// How the program asked for the cursor keys to be sent (DECCKM, on
    /// either screen; normal until a program asks).
    pub fn cursor_keys(&self) -> CursorKeys {
        self.state.cursor_keys
    }

    /// The alternate screen's contents when a full-screen program is
    /// showing it: its rows without trailing spaces, without the blank rows
    /// at the bottom.
    pub fn alternate_contents(&self) -> Option<String> {
        self.state.alternate.as_ref().map(|alternate| screen_text(alternate.parser.screen()))
    }

    /// Leaves the alternate screen, by its closing sequence or without it
    /// (the program that drew it ended or was killed): what it shows is
    /// committed after the window (and after the lines that scrolled off
    /// its top, committed as they went), as lines of their own, so output
    /// printed there is kept.
    pub fn leave_alternate(&mut self) {
        let Some(alternate) = self.state.alternate.take() else { return };
        let text = screen_text(alternate.parser.screen());
        if text.is_empty() {
            return;
        }
        self.state.commit_window_lines();
        self.state.committed.push_str(&text);
        self.state.committed.push('\n');
    }

    /// The memory the renderer holds now, in bytes, apart from committed
    /// text: the window's lines and the erased versions they keep, the held
    /// escape sequence, queued answers and the full-screen emulator. Never
    /// more than [`Screen::window_bound`].
    pub fn window_cost(&self) -> usize {
        let lines: usize = self.state.lines.iter().map(Line::cost).sum();
        lines
            + self.state.after_line.versions.capacity()
            + self.held.bytes.capacity()
            + self.state.responses.capacity()
            + self.alternate_cost()
    }

    /// The most [`Screen::window_cost`] can be for this window size,
    /// whatever was fed.
    ///
    /// Whatever the bytes, the memory held is bounded by the window, never by
    /// the input ([`Screen::window_cost`] measures it):
    /// - the window holds at most `rows` rows of at most `cols` cells; cursor
    ///   movement, absolute positioning, insertion, repetition and tabs never
    ///   take the cursor past the last row or past the last column, and printed
    ///   text wraps at it, so a line longer than the window commits its rows as
    ///   they scroll off the top (a line with no newline costs about its own
    ///   size in committed text and no more);
    /// - a held escape sequence is at most [`STRING_LIMIT`] bytes (the parsers
    ///   never see a longer one), and queued answers at most [`RESPONSE_LIMIT`]
    ///   bytes;
    /// - erased versions of lines kept in the window are at most one line per
    ///   row plus [`KEPT_LIMIT`] bytes: past that, the whole window is
    ///   committed, as if the screen had been cleared;
    /// - the full-screen emulator is one screen plus one screen of scrollback,
    ///   fed in pieces small enough that no row scrolls off unseen, and the
    ///   counts it would loop over once per unit (insert characters, insert
    ///   lines, scroll down) are clamped to the window before it sees them, so
    ///   no sequence costs more than a window's worth of work.
    ///
    /// Committed text is the caller's to take: between two takes it grows by at
    /// most the window's text and kept versions, plus, per escape sequence fed,
    /// one width of characters (a cursor move pads a line with spaces up to the
    /// width) or the sequence itself when it is abandoned.
    pub fn window_bound(&self) -> usize {
        let (rows, cols) = (self.state.rows, self.state.cols);
        // A row holds at most a width of cells, in a vector that may have
        // twice the capacity it uses (it grows by doubling).
        let cells = 2 * (cols + 8) * std::mem::size_of::<Cell>();
        let clusters = 2 * LINE_CLUSTERS * (std::mem::size_of::<String>() + CLUSTER_BYTES);
        // An erased version is one line's text; each row may hold one, and
        // all rows together at most `KEPT_LIMIT` bytes of older ones, plus
        // the one whose arrival commits the window (in strings that may
        // have twice the capacity they use).
        let line_text = (cols + 8) * 4 + LINE_CLUSTERS * CLUSTER_BYTES;
        let kept = rows * line_text + 2 * (KEPT_LIMIT + line_text) + rows * 16;
        // Versions waiting for a wrapped line to end: at most the limit,
        // plus what the window's rows kept (themselves within the limit
        // and a line per row) when they are committed at once, in a string
        // that may have twice the capacity it uses.
        let after = 2 * (2 * KEPT_LIMIT + 2 * rows * line_text);
        rows * (cells + clusters + std::mem::size_of::<Line>())
            + kept
            + after
            + 2 * (STRING_LIMIT + 8)
            + 2 * RESPONSE_LIMIT
            + 2 * alternate_cost(rows, cols)
    }

    fn alternate_cost(&self) -> usize {
        if self.state.alternate.is_some() {
            alternate_cost(self.state.rows, self.state.cols)
        } else {
            0
        }
    }
}

/// A full-screen program's view: a `vt100` emulator that keeps the rows
/// scrolling off its top until the renderer commits them.
///
/// A line that scrolls off the top of the alternate screen (a program printing
/// plain lines on it, with no scroll region) is committed as it goes, in order;
/// a program that redraws in place (cursor addressing, scroll regions: vim,
/// less, top) commits nothing per frame, and its last screen is committed when
/// it leaves, by the closing sequence, by a full reset (`ESC c`) or by ending
/// without one (see [`Screen::leave_alternate`]): text a terminal wipes with
/// the view is still text the command printed, so nothing printed there is
/// hidden. `?47`, `?1047` and `?1049` are the same alternate screen here.
struct Alternate {
    parser: vt100::Parser,
    rows: usize,
    /// Rows that scrolled off the top and are not committed yet, each
    /// ending with a newline.
    scrolled_off: String,
}

impl Alternate {
    fn new(rows: usize, cols: usize) -> Alternate {
        // One screen and one row of scrollback: a piece fed to the emulator
        // scrolls at most a screen (see `process`), and the offset that
        // counts those rows must not reach the end of the scrollback.
        let parser = vt100::Parser::new(rows as u16, cols as u16, rows + 1);
        Alternate { parser, rows, scrolled_off: String::new() }
    }

    /// Feeds `bytes` to the emulator with each line feed preceded by a
    /// carriage return: the PTY runs without output post-processing (see
    /// `pty.rs`), and programs that print plain lines on the alternate
    /// screen (top, a traceback) count on the kernel's `ONLCR` doing this,
    /// as the window's renderer does when it treats a line feed as a new
    /// line. The rows that scroll off its top are collected.
    fn process(&mut self, bytes: &[u8]) {
        // A byte scrolls at most one row, and a whole sequence (all a piece
        // holds when it holds one: see `Screen::feed`) at most a screen.
        for piece in bytes.chunks(self.rows) {
            let screen = self.parser.screen_mut();
            screen.set_scrollback(usize::MAX);
            let before = screen.scrollback();
            // With the view scrolled back by one row, `vt100` moves the
            // view along with every row that scrolls off: the offset counts
            // them, even once the scrollback is full.
            screen.set_scrollback(1);
            let mut lines = piece.split(|&b| b == b'\n');
            if let Some(first) = lines.next() {
                self.parser.process(first);
            }
            for line in lines {
                self.parser.process(b"\r\n");
                self.parser.process(line);
            }
            let screen = self.parser.screen_mut();
            let scrolled = if before > 0 {
                screen.scrollback().saturating_sub(1)
            } else {
                screen.set_scrollback(usize::MAX);
                screen.scrollback()
            };
            if scrolled > 0 {
                screen.set_scrollback(scrolled);
                for row in screen.rows(0, u16::MAX).take(scrolled) {
                    self.scrolled_off.push_str(row.trim_end_matches(' '));
                    self.scrolled_off.push('\n');
                }
            }
            screen.set_scrollback(0);
        }
    }
}

/// What the `vt100` emulator holds: one screen and the alternate one, each
/// of 32-byte cells, and one screen (and a row) of scrollback.
fn alternate_cost(rows: usize, cols: usize) -> usize {
    (3 * rows + 1) * cols * 32
}

/// A `vt100` screen's rows as text: trailing spaces and blank bottom rows
/// removed, and each highlighted row (a menu's selected item, a status
/// bar: see [`highlighted_rows`]) after [`HIGHLIGHT_MARK`].
fn screen_text(screen: &vt100::Screen) -> String {
    let highlighted = highlighted_rows(screen);
    let mut text = String::new();
    for (n, row) in screen.rows(0, u16::MAX).enumerate() {
        if highlighted.get(n).is_some_and(|&on| on) {
            text.push_str(HIGHLIGHT_MARK);
        }
        text.push_str(row.trim_end_matches(' '));
        text.push('\n');
    }
    let end = text.trim_end_matches('\n').len();
    text.truncate(end);
    text
}

/// Which rows of `screen` are highlighted: they show text in reverse video
/// (`ESC [ 7 m`, curses' `A_REVERSE` and `A_STANDOUT`), or on a background
/// colour other than the one most of the screen's text is on (`ncdu` and
/// `htop` show their selection on a coloured bar). Blanks do not count, so
/// the block a program draws as its own cursor marks nothing. Time: one
/// pass over the screen's cells, twice.
fn highlighted_rows(screen: &vt100::Screen) -> Vec<bool> {
    let (rows, cols) = screen.size();
    let text_cells = || {
        (0..rows).flat_map(move |row| {
            (0..cols).filter_map(move |col| {
                let cell = screen.cell(row, col)?;
                cell.contents().chars().any(|c| !c.is_whitespace()).then_some((row, cell))
            })
        })
    };
    // The usual background: the one most rows have under most of their
    // text not in reverse video. Rows vote, not cells: two long bars (a
    // title and a status line) must not outweigh a list of short rows (a
    // handful of colours: short lists do).
    let mut row_colours: Vec<Vec<(vt100::Color, usize)>> = vec![Vec::new(); usize::from(rows)];
    for (row, cell) in text_cells().filter(|(_, cell)| !cell.inverse()) {
        tally(&mut row_colours[usize::from(row)], cell.bgcolor());
    }
    let mut votes: Vec<(vt100::Color, usize)> = Vec::new();
    for colours in &row_colours {
        if let Some(&(colour, _)) = colours.iter().max_by_key(|(_, count)| *count) {
            tally(&mut votes, colour);
        }
    }
    let usual = votes.iter().max_by_key(|(_, count)| *count).map(|(color, _)| *color);
    let mut highlighted = vec![false; usize::from(rows)];
    for (row, cell) in text_cells() {
        if cell.inverse() || usual.is_some_and(|usual| cell.bgcolor() != usual) {
            highlighted[usize::from(row)] = true;
        }
    }
    highlighted
}

/// Counts one more `colour` in `counts`.
fn tally(counts: &mut Vec<(vt100::Color, usize)>, colour: vt100::Color) {
    match counts.iter_mut().find(|(known, _)| *known == colour) {
        Some((_, count)) => *count += 1,
        None => counts.push((colour, 1)),
    }
}

/// The first bytes of a UTF-8 character.
#[derive(Default)]
struct Partial {
    bytes: [u8; 4],
    len: usize,
    /// How many bytes the character has.
    need: usize,
}

impl Partial {
    /// How many bytes a character that starts with `lead` has; 1 for a
    /// byte that starts none.
    fn length(lead: u8) -> usize {
        match lead {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => 1,
        }
    }

    /// How many bytes at the end of `bytes` begin a character they do not
    /// finish.
    fn unfinished_tail(bytes: &[u8]) -> usize {
        let from = bytes.len().saturating_sub(3);
        for (i, &byte) in bytes[from..].iter().enumerate().rev() {
            if (0x80..0xc0).contains(&byte) {
                continue;
            }
            let have = bytes.len() - from - i;
            return if Partial::length(byte) > have { have } else { 0 };
        }
        0
    }

    fn start(&mut self, bytes: &[u8]) {
        self.bytes[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        self.need = Partial::length(bytes[0]);
    }

    /// Adds the continuation bytes `bytes` starts with, as many as the
    /// character needs; returns how many.
    fn extend(&mut self, bytes: &[u8]) -> usize {
        let mut taken = 0;
        while self.len < self.need && taken < bytes.len() && (0x80..0xc0).contains(&bytes[taken]) {
            self.bytes[self.len] = bytes[taken];
            self.len += 1;
            taken += 1;
        }
        taken
    }
}

/// What reading one more byte does to the held escape sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The byte belongs to the sequence.
    Hold,
    /// The byte ended the sequence (it is part of it).
    Complete,
    /// The byte cancelled the sequence (CAN, SUB): nothing of it is shown.
    Drop,
    /// The sequence is not one: its bytes are text, and the byte is read
    /// afresh, after an ESC the sequence held last if `escape`.
    Abandon {
        /// The sequence ended with an ESC that starts the next one.
        escape: bool,
    },
}

/// Which escape sequence is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ESC`, then intermediates.
    Escape,
    /// `ESC [`, parameters and intermediates.
    Csi,
    /// A control string: `ESC ]` (OSC, the only kind the renderer reads),
    /// `ESC P` (DCS), `ESC X` (SOS), `ESC ^` (PM), `ESC _` (APC); `escape`
    /// once an ESC was read inside it, which ends it if `\` follows.
    String {
        /// An OSC string.
        osc: bool,
        /// The last byte read was ESC.
        escape: bool,
    },
}

/// The escape sequence being read, held back from the parsers until it
/// ends, so that one that never ends cannot swallow the text after it:
/// `vte` would stay inside an unterminated string or CSI sequence for any
/// number of bytes, and `vt100` (with its own parser) likewise.
///
/// The parsers see only whole sequences and text; the only state they keep
/// between two pieces is an unfinished UTF-8 character.
///
/// One that does not end as a sequence would is not one, and its bytes after
/// the ESC are shown as text: a control string (OSC, DCS, SOS, PM, APC) that
/// reaches a line feed or [`STRING_LIMIT`] bytes, a CSI sequence that reaches a
/// line feed, a byte that cannot be in it or [`CSI_LIMIT`] bytes, and any
/// sequence that another ESC interrupts (a string's `ESC \` excepted). The end
/// marker starts with an ESC, and [`Screen::commit_all`] (called when a command
/// ends) abandons whatever is held, so nothing a command leaves open swallows
/// its own last text. A sequence cancelled with CAN or SUB is dropped, as a
/// terminal drops it.
#[derive(Default)]
struct Held {
    /// The sequence from its ESC on; empty when none is held.
    bytes: Vec<u8>,
    kind: Option<Kind>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.kind.is_none()
    }

    /// Starts holding a sequence at its ESC.
    fn start(&mut self) {
        self.bytes.clear();
        self.bytes.push(0x1b);
        self.kind = Some(Kind::Escape);
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.kind = None;
        if self.bytes.capacity() > 2 * CSI_LIMIT {
            // A long string held once need not cost its size for ever.
            self.bytes = Vec::new();
        }
    }

    /// Whether a completed sequence means anything to the parsers: every
    /// one but the control strings nobody here reads (DCS, SOS, PM, APC).
    fn forwards(&self) -> bool {
        !matches!(self.kind, Some(Kind::String { osc: false, .. }))
    }

    /// Reads `byte` into the held sequence.
    fn step(&mut self, byte: u8) -> Step {
        let Some(kind) = self.kind else { return Step::Abandon { escape: false } };
        let len = self.bytes.len();
        let step = match kind {
            Kind::Escape => match byte {
                0x20..=0x2f if len < ESCAPE_LIMIT => Step::Hold,
                b'[' if len == 1 => {
                    self.kind = Some(Kind::Csi);
                    Step::Hold
                }
                b']' | b'P' | b'X' | b'^' | b'_' if len == 1 => {
                    self.kind = Some(Kind::String { osc: byte == b']', escape: false });
                    Step::Hold
                }
                0x30..=0x7e => Step::Complete,
                0x18 | 0x1a => Step::Drop,
                _ => Step::Abandon { escape: false },
            },
            Kind::Csi => match byte {
                0x40..=0x7e => Step::Complete,
                0x18 | 0x1a => Step::Drop,
                // A line feed, another sequence or a byte no CSI sequence
                // holds: this was not one.
                0x0a..=0x0c | 0x1b | 0x80..=0xff => Step::Abandon { escape: false },
                _ if len >= CSI_LIMIT => Step::Abandon { escape: false },
                // Parameters, intermediates, and controls (which a terminal
                // executes where they stand).
                _ => Step::Hold,
            },
            Kind::String { osc, escape: false } => match byte {
                0x07 => {
                    // Every OSC reaches the parser ended by BEL.
                    if osc {
                        self.bytes.push(0x07);
                    }
                    return Step::Complete;
                }
                0x1b => {
                    self.kind = Some(Kind::String { osc, escape: true });
                    return Step::Hold;
                }
                0x18 | 0x1a => Step::Drop,
                0x0a..=0x0c => Step::Abandon { escape: false },
                _ if len >= STRING_LIMIT => Step::Abandon { escape: false },
                _ => Step::Hold,
            },
            Kind::String { osc, escape: true } => {
                if byte != b'\\' {
                    return Step::Abandon { escape: true };
                }
                if osc {
                    self.bytes.push(0x07);
                }
                return Step::Complete;
            }
        };
        if matches!(step, Step::Hold | Step::Complete) {
            self.bytes.push(byte);
        }
        step
    }
}

/// One column of a line: a character, a placeholder, or a character with
/// extra zero-width characters, stored in the line's cluster table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell(u32);

impl Cell {
    const BLANK: Cell = Cell(' ' as u32);
    /// A column a tab spans after the tab character itself; never rendered.
    const TAB_FILL: Cell = Cell(0x11_0000);
    /// The right half of a wide character; never rendered.
    const WIDE_FILL: Cell = Cell(0x11_0001);
    /// Cells from here on refer to the line's clusters.
    const CLUSTER: u32 = 0x20_0000;

    fn char(c: char) -> Cell {
        Cell(u32::from(c))
    }

    fn cluster(&self) -> Option<usize> {
        self.0.checked_sub(Cell::CLUSTER).map(|i| i as usize)
    }

    /// Trailing cells like these are not part of a finished line.
    fn is_blank(self) -> bool {
        matches!(self, Cell::BLANK | Cell::TAB_FILL | Cell::WIDE_FILL)
    }
}

/// One line of the window; cells so that overwriting a column is O(1).
///
/// A line the cursor has left (by a line feed or cursor movement) has been seen
/// as it is. When a program then erases or overwrites it (cursor up, `\r`,
/// erase-line, delete or erase characters, erase-below), the line as it was is
/// kept until the cursor leaves the line again, and then judged: if the new
/// text starts with the same first word (its first run of letters: spinners,
/// bars, digits and punctuation do not count; `Building` and `Built`, which
/// share four letters, are one word), it is the same line updating itself, a
/// progress frame, and only the newest version is kept, and from then on its
/// row is a progress row; otherwise, or if the line was left blank, the old
/// version is committed just above what replaced it (after the whole line, when
/// the row is the continuation of a wrapped line). So an erased `FATAL` line
/// survives, while `docker pull`-style displays (cursor up over N lines,
/// redrawn again and again) keep only their final state. On a progress row,
/// what replaces a frame or clears it away (erased, and left blank by the
/// cursor: `indicatif` and `rich` clear their bars when the work is done, and
/// move bars between rows as they come and go) takes its place, as on a
/// terminal: the recorded displays of `uv`, `pip`, `cargo` and `npm` come back
/// exactly as tmux shows them (`tests/data`). A row stops being a progress row
/// when it leaves the window. The line the cursor is on and has not left yet is
/// a progress line: `\r` and erase rewrite it freely (`pip`, `curl`, `cargo`
/// bars), and only its final state is kept. Erasing the whole screen commits
/// it.
#[derive(Default)]
struct Line {
    cells: Vec<Cell>,
    /// Characters with their zero-width companions (an emoji and its
    /// variation selector, a letter and its accents), at most
    /// [`LINE_CLUSTERS`] of them.
    clusters: Vec<String>,
    /// More than half the clusters are in use: no new ones until the line
    /// is cleared (so a stream of accents does not rescan the line for
    /// every character).
    clusters_full: bool,
    /// The cursor left this line since its text was last kept in `before`:
    /// it has been seen as it is, so a change that destroys some of it
    /// keeps it first.
    settled: bool,
    /// The line as it was seen before a change destroyed some of it, until
    /// the cursor leaves the line and the change is judged (see
    /// [`Line::judge`]).
    before: Option<String>,
    /// Earlier versions of this line that other lines replaced, each with
    /// its newline: committed just before it.
    replaced: String,
    /// The row's text goes on on the next row: printing past the last
    /// column wrapped it there (a terminal's soft wrap). Committed, the two
    /// rows are one line. Clearing either row whole ends the line here, as
    /// in xterm and tmux.
    wrapped: bool,
    /// A line on this row redrew itself (a version was judged the same
    /// line): the row is a progress row, whose frames are not kept, and
    /// whatever replaces a frame takes its place, until the row leaves the
    /// window.
    redrawn: bool,
    /// The cursor came to this row by its number (`ESC [ N H`, `f`, `d`),
    /// as a pager repaints its page: a line written there is another line
    /// unless its text is the same, whatever its first word (the lines of
    /// a log often share theirs: `commit`, a date). Judged once.
    placed: bool,
}

impl Line {
    fn len(&self) -> usize {
        self.cells.len()
    }

    /// Empties the line's text; the versions it keeps stay.
    fn clear(&mut self) {
        self.cells.clear();
        self.clusters.clear();
        self.clusters_full = false;
    }

    /// Makes the line as new, forgetting the versions it keeps.
    fn reset(&mut self) {
        self.clear();
        self.settled = false;
        self.before = None;
        self.replaced = String::new();
        self.wrapped = false;
        self.redrawn = false;
        self.placed = false;
    }

    /// Bytes held by this line.
    fn cost(&self) -> usize {
        std::mem::size_of::<Line>()
            + self.cells.capacity() * std::mem::size_of::<Cell>()
            + self.clusters.capacity() * std::mem::size_of::<String>()
            + self.clusters.iter().map(String::capacity).sum::<usize>()
            + self.before.as_ref().map_or(0, String::capacity)
            + self.replaced.capacity()
    }

    /// Bytes of erased versions this line keeps.
    fn kept(&self) -> usize {
        self.before.as_ref().map_or(0, String::len) + self.replaced.len()
    }

    /// The line's text, without trailing blanks.
    fn text(&self) -> String {
        let mut text = String::new();
        self.write(0..self.trimmed_len(), &mut text);
        text
    }

    /// Before a change that may destroy some of the line's text: a line
    /// that has been seen keeps its text until the change is judged.
    #[inline]
    fn edit(&mut self) {
        if self.settled {
            self.keep_before();
        }
    }

    #[cold]
    fn keep_before(&mut self) {
        self.settled = false;
        if self.before.is_none() && self.trimmed_len() > 0 {
            let mut text = self.text();
            text.shrink_to_fit();
            self.before = Some(text);
        }
    }

    /// The cursor leaves the line: a change made since it was last seen is
    /// judged, unless the line is blank (it may be redrawn later). A
    /// progress line left blank was cleared away by its display, as
    /// `indicatif` and `rich` clear their bars when the work is done: its
    /// last frame goes, as on a terminal.
    #[inline]
    fn leave(&mut self) {
        if self.before.is_some() {
            if self.trimmed_len() == 0 {
                if self.redrawn {
                    self.before = None;
                }
                return;
            }
            self.judge();
        }
        if self.before.is_none() {
            // Passed through without a change: a later change there is
            // judged by how the cursor comes back.
            self.placed = false;
        }
        self.settled = true;
    }

    /// Keeps the version in `before` among the replaced ones if the line
    /// now is another line; drops it if the line now is the same line
    /// updating itself (the same first word), and from then on the row is
    /// a progress row. On a progress row, a frame goes when another line
    /// takes its place, as on a terminal (`Compiling…` then `Linking…` on
    /// one status line, bars that move up a row as others finish). A blank
    /// line replaces nothing: the erased version stands in for it.
    /// On a row the cursor came to by its number ([`Line::placed`]), only
    /// the same text is the same line, and it makes no progress row.
    fn judge(&mut self) {
        let Some(before) = self.before.take() else { return };
        let now = self.text();
        let placed = std::mem::take(&mut self.placed);
        if placed {
            if now != before {
                self.replaced.push_str(&before);
                self.replaced.push('\n');
            }
        } else if self.trimmed_len() > 0 && same_word(first_word(&before), first_word(&now)) {
            self.redrawn = true;
        } else if !self.redrawn {
            self.replaced.push_str(&before);
            self.replaced.push('\n');
        }
    }

    /// Moves the line to `out`: the versions it replaced, then its text,
    /// then a newline if `newline`. A blank line that replaced a version
    /// is that version alone. A wrapped row has no newline: the next row
    /// goes on with the same line. `blanks` counts the blanks at the end of
    /// the rows of a wrapped line committed so far: written before the
    /// next text of the line, dropped if none comes, so a line is never
    /// padded however many rows its blanks take. At least `keep` cells are
    /// written (the blanks a program printed at the end of a line that is
    /// not finished yet).
    #[inline]
    fn commit(&mut self, out: &mut String, newline: bool, keep: usize, blanks: &mut usize) {
        let trimmed = self.trimmed_len();
        let end = if self.wrapped { trimmed } else { trimmed.max(keep.min(self.len())) };
        let erased = end == 0 && self.before.is_some();
        self.judge();
        if !self.replaced.is_empty() {
            out.push_str(&std::mem::take(&mut self.replaced));
        }
        if erased {
            return;
        }
        if end > 0 && *blanks > 0 {
            out.extend(std::iter::repeat_n(' ', std::mem::take(blanks)));
        }
        self.write(0..end, out);
        if self.wrapped {
            *blanks += self.cells[end..].iter().filter(|&&cell| cell == Cell::BLANK).count();
        } else {
            *blanks = 0;
            if newline {
                out.push('\n');
            }
        }
    }

    /// Moves what a line taken off the screen showed (its kept versions,
    /// then its text) to `out`, each with its newline; a blank line that
    /// keeps nothing showed nothing and adds nothing.
    fn keep_removed(mut self, out: &mut String, blanks: &mut usize) {
        if self.trimmed_len() > 0 || self.kept() > 0 {
            self.commit(out, true, 0, blanks);
        }
    }

    /// The length without trailing blanks.
    fn trimmed_len(&self) -> usize {
        self.cells.iter().rposition(|cell| !cell.is_blank()).map_or(0, |i| i + 1)
    }

    /// Appends the text of `range` to `out`.
    fn write(&self, range: Range<usize>, out: &mut String) {
        out.reserve(range.len());
        for &cell in &self.cells[range] {
            if cell.0 < 0x80 {
                out.push(char::from(cell.0 as u8));
                continue;
            }
            match cell {
                Cell::TAB_FILL | Cell::WIDE_FILL => {}
                _ => match cell.cluster() {
                    Some(i) => out.push_str(&self.clusters[i]),
                    None => out.push(char::from_u32(cell.0).unwrap_or(' ')),
                },
            }
        }
    }

    /// A wide character cut at `col` (its right half there) is blanked:
    /// half of it cannot be shown.
    fn split_at(&mut self, col: usize) {
        if self.cells.get(col) == Some(&Cell::WIDE_FILL) {
            self.cells[col] = Cell::BLANK;
            if col > 0 {
                self.cells[col - 1] = Cell::BLANK;
            }
        }
    }

    /// Writes `cell` at `col`, two columns wide if `wide`, padding the line
    /// with blanks up to it.
    fn put(&mut self, col: usize, cell: Cell, wide: bool) {
        let end = col + if wide { 2 } else { 1 };
        if self.cells.len() < end {
            self.cells.resize(end, Cell::BLANK);
        }
        self.split_at(col);
        self.split_at(end);
        self.cells[col] = cell;
        if wide {
            self.cells[col + 1] = Cell::WIDE_FILL;
        }
    }

    /// Adds a zero-width character to the character before `col`; false if
    /// there is none or it holds as much as it may.
    fn attach(&mut self, col: usize, c: char) -> bool {
        let Some(mut base) = col.checked_sub(1) else { return false };
        if self.cells.get(base) == Some(&Cell::WIDE_FILL) && base > 0 {
            base -= 1;
        }
        let Some(&cell) = self.cells.get(base) else { return false };
        if cell.is_blank() && cell != Cell::BLANK {
            return false;
        }
        if let Some(i) = cell.cluster() {
            if self.clusters[i].len() + c.len_utf8() > CLUSTER_BYTES {
                return false;
            }
            self.clusters[i].push(c);
            return true;
        }
        if self.clusters_full {
            return false;
        }
        if self.clusters.len() >= LINE_CLUSTERS {
            self.collect_clusters();
            if self.clusters.len() > LINE_CLUSTERS / 2 {
                self.clusters_full = true;
                return false;
            }
        }
        let mut cluster = String::with_capacity(CLUSTER_BYTES);
        cluster.push(char::from_u32(cell.0).unwrap_or(' '));
        cluster.push(c);
        self.cells[base] = Cell(Cell::CLUSTER + self.clusters.len() as u32);
        self.clusters.push(cluster);
        true
    }

    /// Drops the clusters no cell refers to any more (overwritten or
    /// committed ones).
    fn collect_clusters(&mut self) {
        let mut kept = Vec::new();
        for cell in &mut self.cells {
            if let Some(i) = cell.cluster() {
                *cell = Cell(Cell::CLUSTER + kept.len() as u32);
                kept.push(std::mem::take(&mut self.clusters[i]));
            }
        }
        self.clusters = kept;
    }
}

/// Commits `line` to `out`, the next row of committed text. The erased
/// versions of a row that a wrapped row goes on to are kept in `after`
/// until its line ends, and then committed, so that a line that wrapped is
/// never split by them.
/// At most [`KEPT_LIMIT`] bytes wait in `after`: past that, the line is
/// ended where it is.
fn commit_row(line: &mut Line, out: &mut String, after: &mut After, newline: bool, keep: usize) {
    if after.mid_line && (line.before.is_some() || !line.replaced.is_empty()) {
        line.judge();
        after.versions.push_str(&std::mem::take(&mut line.replaced));
    }
    line.commit(out, newline, keep, &mut after.blanks);
    after.mid_line = line.wrapped;
    if after.mid_line && after.versions.len() <= KEPT_LIMIT {
        return;
    }
    if !after.versions.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&std::mem::take(&mut after.versions));
        after.mid_line = false;
        after.blanks = 0;
    }
}

/// Where committed text stands in a line that wrapped (see [`commit_row`]).
#[derive(Default)]
struct After {
    /// The last row committed wrapped: the next one goes on with its line.
    mid_line: bool,
    /// Erased versions of rows of that line, committed once it ends.
    versions: String,
    /// Blanks at the end of the line's rows so far (see [`Line::commit`]).
    blanks: usize,
}

impl After {
    /// Commits the versions waiting, on a line of their own, and ends the
    /// line where it is.
    fn flush(&mut self, out: &mut String) {
        self.mid_line = false;
        self.blanks = 0;
        if self.versions.is_empty() {
            return;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&std::mem::take(&mut self.versions));
    }
}

/// Ends `text` with a newline unless it is empty or ends with one (removed
/// lines whose last row had wrapped).
fn end_line(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}

/// A line's first word: its first run of letters. Spinners, progress
/// bars, counts, percentages and punctuation before it or in it do not
/// count, so the frames of a progress line share it (`⠋ Container db
/// Starting` and `✔ Container db  Started`, `a3ed95caeb02: Downloading`
/// and `a3ed95caeb02: Pull complete`), while a line that says something
/// else does not (`FATAL: 3 tests failed` and `all 120 tests passed`).
fn first_word(text: &str) -> &str {
    let Some(start) = text.find(char::is_alphabetic) else { return "" };
    let word = &text[start..];
    let end = word.find(|c: char| !c.is_alphabetic()).unwrap_or(word.len());
    &word[..end]
}

/// Whether two first words are one word said at two moments of the work:
/// the same, or sharing their first four letters at least (`Building` and
/// `Built`, `Downloading` and `Downloaded`, `Preparing` and `Prepared`).
fn same_word(a: &str, b: &str) -> bool {
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    a == b || shared >= 4
}

/// Why the parser paused inside [`Screen::feed`].
enum Pause {
    /// Report this to the caller.
    Stop(Stop),
    /// A cursor-position query on the alternate screen: answered once the
    /// emulator has seen the bytes before it.
    CursorQuery,
    /// On the alternate screen, a sequence whose count `vt100` would loop
    /// over once per unit (insert characters or lines, scroll down: 65535
    /// of them cost seconds): the emulator gets this clamped one instead.
    Oversized(String),
    /// A full reset (`ESC c`) on the alternate screen: it leaves the
    /// alternate screen and clears it, so what it shows is kept first, as
    /// when the program ends there.
    Reset,
}

/// The window and its cursor, as the parser drives them.
///
/// Rows are the window's width, and text wraps at it as xterm and tmux wrap it:
/// a character printed in the last column leaves the cursor waiting there
/// (pending wrap), and the next one goes to the start of the next row; `\r`,
/// cursor movement and erasing act on rows, so a program that moves up over a
/// line it knows has wrapped (`uv`, every `indicatif` display) lands where it
/// means to. Autowrap off (`ESC [ ? 7 l`) overwrites the last column instead,
/// until a shell marker turns it back on. A row that wrapped is joined to the
/// next one when committed: an agent reads a wrapped line as the one line it
/// is, and a hard newline ends a line. Clearing either row of a wrap whole ends
/// the line there, as tmux does. Wide characters (CJK, most emoji) take two
/// columns; combining marks, joiners and variation selectors stay with the
/// character before them.
///
/// Scroll up (`ESC [ S`), insert lines and delete lines move the window's lines
/// whole, as on a real screen (scroll regions are not tracked: the whole window
/// moves). Scrolling down from the top (`ESC [ T`, reverse index at the top,
/// with or without a scroll region) commits the window first, as erasing the
/// screen does, so what is printed next never comes before what was printed
/// earlier. A line scrolled off the top is committed; one pushed off the bottom
/// or deleted is kept, with its own erased versions, just above the line that
/// took its row; the cursor keeps its row, so what is printed next never mixes
/// with what was there. Absolute positioning (`ESC [ row ; col H`) counts rows
/// from the window's first row: the top of the screen once the window fills it,
/// as when a pager repaints its page in place, and where a command's output
/// began before that.
struct Renderer {
    rows: usize,
    cols: usize,
    nonce: Vec<u8>,
    /// The window of lines that can still change; the last is the newest.
    /// Never more than `rows` lines.
    lines: VecDeque<Line>,
    /// Cursor row (index into `lines`) and column. The column is `cols`
    /// (one past the last) when a character was printed in the last column
    /// and the next one wraps to the next row (a terminal's pending wrap).
    row: usize,
    col: usize,
    /// Printing past the last column wraps to the next row (DECAWM, on
    /// unless a program turns it off with `ESC [ ? 7 l`; each marker turns
    /// it on again, so a command that leaves it off cuts no later lines).
    /// Off, the last column is overwritten.
    autowrap: bool,
    saved_cursor: (usize, usize),
    /// The cursor was saved (`ESC 7`) and not restored yet: what is drawn
    /// meanwhile is an overlay put where it belongs by number (`apt`'s
    /// progress bar on the last row), not a page repainted row by row, so
    /// the rows it reaches are not [`Line::placed`].
    overlay: bool,
    /// The last character printed and whether it is wide, for REP.
    last_printed: Option<(char, bool)>,
    committed: String,
    /// The emulator for a full-screen program, while one is showing.
    alternate: Option<Alternate>,
    /// Set when parsing must pause.
    pause: Option<Pause>,
    /// Between a start marker and an end marker: queries are answered.
    in_command: bool,
    /// Answers to queries, for the caller to write to the terminal.
    responses: Vec<u8>,
    /// The cursor-key mode programs set (DECCKM), for the keys sent to
    /// them.
    cursor_keys: CursorKeys,
    /// Erased versions of a row a wrapped line went on to, committed once
    /// that line ends (see [`commit_row`]).
    after_line: After,
}

impl Renderer {
    fn in_alternate(&self) -> bool {
        self.alternate.is_some()
    }

    fn line(&mut self) -> &mut Line {
        &mut self.lines[self.row]
    }

    /// The cursor's line, about to change in a way that may destroy some
    /// of its text.
    fn edit_line(&mut self) -> &mut Line {
        let line = &mut self.lines[self.row];
        line.edit();
        line
    }

    /// The cursor came to its row by the row's number: the row is
    /// [`Line::placed`], unless an overlay is being drawn.
    fn place(&mut self) {
        if !self.overlay {
            self.lines[self.row].placed = true;
        }
    }

    /// The rightmost column cursor movement may reach: the last column.
    fn max_col(&self) -> usize {
        self.cols - 1
    }

    /// Appends the text of rows `start..end` to `out`, all their cells,
    /// with a newline after each that did not wrap.
    fn write_line(&self, start: usize, end: usize, out: &mut String) {
        for line in self.lines.range(start..end) {
            line.write(0..line.len(), out);
            if !line.wrapped {
                out.push('\n');
            }
        }
    }

    /// The first row of the line the cursor's row belongs to: rows above
    /// it that wrapped onto it are the same line.
    fn line_start(&self, row: usize) -> usize {
        let mut start = row;
        while start > 0 && self.lines[start - 1].wrapped {
            start -= 1;
        }
        start
    }

    /// Makes room for a character `width` columns wide that does not fit
    /// before the right edge: with autowrap, the cursor's row wraps and the
    /// cursor goes to the start of the next row (scrolling at the bottom);
    /// without, it stays in the last column, and a wide character that does
    /// not fit there is not shown (false), as in xterm and tmux.
    #[cold]
    fn make_room(&mut self, width: usize) -> bool {
        if self.autowrap {
            self.lines[self.row].wrapped = true;
            self.line_feed();
            return true;
        }
        self.col = self.cols - 1;
        width == 1
    }

    /// Clears the cursor's row whole: a line that wrapped onto it, or from
    /// it, ends there (tmux clears both rows' wrap flags).
    fn clear_row(&mut self) {
        let row = self.row;
        let line = self.edit_line();
        line.clear();
        line.wrapped = false;
        if row > 0 {
            self.lines[row - 1].wrapped = false;
        }
    }
    /// Moves the cursor to `row` of the window, leaving the line it was on.
    fn set_row(&mut self, row: usize) {
        if row != self.row {
            let left = self.row;
            self.leave_row();
            self.row = row;
            // Only the line just left can have kept a new version.
            if !self.lines[left].replaced.is_empty() {
                self.bound_kept();
            }
        }
    }

    /// The cursor leaves its line (the caller moves it).
    #[inline]
    fn leave_row(&mut self) {
        self.lines[self.row].leave();
    }

    /// Keeps the erased versions the window holds within [`KEPT_LIMIT`]
    /// (beyond one per line): past it, the window is committed whole, as if
    /// the screen had been cleared, and the cursor keeps its column.
    fn bound_kept(&mut self) {
        let replaced: usize = self.lines.iter().map(|line| line.replaced.len()).sum();
        if replaced > KEPT_LIMIT {
            self.commit_window();
        }
    }

    #[cold]
    fn commit_window(&mut self) {
        let col = self.col;
        self.commit_window_lines();
        self.col = col.min(self.cols - 1);
    }

    fn line_feed(&mut self) {
        self.leave_row();
        self.row += 1;
        self.col = 0;
        if self.row < self.lines.len() {
            self.bound_kept_if_any();
            return;
        }
        if self.lines.len() < self.rows {
            self.lines.push_back(Line::default());
            self.bound_kept_if_any();
            return;
        }
        // The top line scrolls out of reach: it is final now. Its buffer is
        // reused for the new line, so a long output allocates nothing per
        // line.
        let mut top = self.lines.pop_front().expect("the window is never empty");
        self.commit_row(&mut top, true, 0);
        top.reset();
        self.lines.push_back(top);
        self.row -= 1;
        self.saved_cursor.0 = self.saved_cursor.0.saturating_sub(1);
        self.bound_kept_if_any();
    }

    /// Commits `line`, a row leaving the window at its top (see
    /// [`commit_row`]).
    fn commit_row(&mut self, line: &mut Line, newline: bool, keep: usize) {
        commit_row(line, &mut self.committed, &mut self.after_line, newline, keep);
    }

    /// [`Renderer::bound_kept`], when the line just left keeps versions.
    #[inline]
    fn bound_kept_if_any(&mut self) {
        if self.row > 0 && !self.lines[self.row - 1].replaced.is_empty() {
            self.bound_kept();
        }
    }

    /// Moves the first `n` lines of the window to the committed text; with
    /// `all`, the window is emptied and the last line needs no newline. The
    /// cursor's line keeps its text up to the cursor, blanks included: a
    /// line another reply finishes (`nohup: ` then `ignoring input`) loses
    /// no character.
    fn commit_lines(&mut self, n: usize, all: bool) {
        let count = n.min(self.lines.len());
        for i in 0..count {
            let last = all && i + 1 == self.lines.len();
            let keep = if last && i == self.row { self.col } else { 0 };
            let line = &mut self.lines[i];
            if last && line.len() == 0 && line.kept() == 0 {
                break;
            }
            commit_row(line, &mut self.committed, &mut self.after_line, !last, keep);
        }
        if all {
            self.after_line.flush(&mut self.committed);
        }
        if all {
            self.lines.truncate(1);
            self.lines[0].reset();
            self.row = 0;
            self.col = 0;
            self.saved_cursor = (0, 0);
        } else {
            let n = n.min(self.lines.len() - 1);
            self.lines.drain(..n);
            self.row -= n.min(self.row);
            self.saved_cursor.0 = self.saved_cursor.0.saturating_sub(n);
        }
    }

    /// Commits the whole window as complete lines: its last line, if it has
    /// text, ends with a newline too. Before text that does not belong to
    /// the window (a full-screen view's), so the two never share a line.
    fn commit_window_lines(&mut self) {
        self.commit_lines(self.lines.len(), true);
        if !self.committed.is_empty() && !self.committed.ends_with('\n') {
            self.committed.push('\n');
        }
    }

    /// Commits the rows that scrolled off the full-screen view, after the
    /// window.
    fn commit_scrolled_off(&mut self) {
        let Some(alternate) = &mut self.alternate else { return };
        if alternate.scrolled_off.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut alternate.scrolled_off);
        self.commit_window_lines();
        self.committed.push_str(&rows);
    }

    fn print_char(&mut self, c: char) {
        if c.is_ascii() {
            self.print_ascii(c);
        } else {
            self.print_unicode(c);
        }
    }

    /// The common case, kept short enough to inline: one column, appended
    /// or overwriting.
    #[inline]
    fn print_ascii(&mut self, c: char) {
        if self.col >= self.cols && !self.make_room(1) {
            return;
        }
        let col = self.col;
        let line = &mut self.lines[self.row];
        if col == line.cells.len() {
            line.cells.push(Cell::char(c));
        } else {
            if col < line.cells.len() {
                line.edit();
            }
            line.put(col, Cell::char(c), false);
        }
        self.advance(1);
        self.last_printed = Some((c, false));
    }

    /// Moves the cursor past a character just printed: to the pending-wrap
    /// column after the last one, or, without autowrap, no further than the
    /// last column.
    #[inline]
    fn advance(&mut self, width: usize) {
        self.col += width;
        if !self.autowrap && self.col >= self.cols {
            self.col = self.cols - 1;
        }
    }

    fn print_unicode(&mut self, c: char) {
        let width = c.width().unwrap_or(1);
        if width == 0 && self.col > 0 {
            let col = self.col;
            if self.line().attach(col, c) {
                return;
            }
        }
        let wide = width == 2;
        let width = if wide { 2 } else { 1 };
        if self.col + width > self.cols && !self.make_room(width) {
            return;
        }
        let col = self.col;
        let line = self.line();
        if col < line.len() {
            line.edit();
        }
        line.put(col, Cell::char(c), wide);
        self.advance(width);
        self.last_printed = Some((c, wide));
    }

    /// A tab moves to the next stop, and never past the last column (in
    /// the last column it does nothing, as in tmux).
    fn tab(&mut self) {
        let (col, cols) = (self.col, self.cols);
        if col >= cols - 1 {
            return;
        }
        let next = ((col / 8 + 1) * 8).min(cols - 1);
        let line = self.line();
        if col >= line.len() {
            // Appending: keep the tab itself (agents parse tab-separated
            // output), padded to its stop with placeholders that render as
            // nothing.
            line.put(col, Cell::char('\t'), false);
            line.cells.resize(next.max(col + 1), Cell::TAB_FILL);
        }
        self.col = next;
    }

    fn move_to_row(&mut self, row: usize) {
        let row = row.min(self.rows - 1);
        while self.lines.len() <= row {
            self.lines.push_back(Line::default());
        }
        self.set_row(row);
    }

    /// Erase in line (`ESC [ K`): from the cursor to the end (0), from
    /// the start to the cursor (1), or all of it (2). As in tmux, an erase
    /// that covers the whole row ends a wrapped line there, and one at the
    /// pending-wrap column erases nothing.
    fn erase_in_line(&mut self, mode: u16) {
        let (col, cols) = (self.col, self.cols);
        match mode {
            0 if col >= cols => {}
            0 if col > 0 => {
                let line = self.edit_line();
                line.split_at(col);
                if line.wrapped {
                    // The row is still a whole width of the line.
                    let end = line.len();
                    line.cells[col.min(end)..].fill(Cell::BLANK);
                } else {
                    line.cells.truncate(col);
                }
            }
            1 if col < cols - 1 => {
                let line = self.edit_line();
                let end = (col + 1).min(line.len());
                line.split_at(end);
                line.cells[..end].fill(Cell::BLANK);
            }
            _ => self.clear_row(),
        }
    }

    /// Erases the cursor's line from the cursor on and the lines below it
    /// (`ESC [ J`): lines that were seen keep their text as erased
    /// versions; blank lines at the bottom go.
    fn erase_below(&mut self) {
        self.erase_in_line(0);
        let row = self.row;
        if row + 1 < self.lines.len() {
            self.lines[row].wrapped = false;
        }
        for line in self.lines.range_mut(row + 1..) {
            line.edit();
            line.clear();
            line.wrapped = false;
        }
        while self.lines.len() > self.row + 1
            && self.lines.back().is_some_and(|line| line.len() == 0 && line.kept() == 0)
        {
            self.lines.pop_back();
        }
    }

    /// Scrolls up (`ESC [ n S`): the top `n` lines go off the top of the
    /// screen and are final, as on a real terminal; the cursor keeps its
    /// row, now on the line that moved up to it or on a blank one.
    fn scroll_up(&mut self, n: usize) {
        self.leave_row();
        let n = n.min(self.lines.len());
        // When the whole window goes, the blank rows at its bottom showed
        // nothing and are not kept.
        let shown = if n == self.lines.len() {
            self.lines
                .iter()
                .rposition(|line| line.trimmed_len() > 0 || line.kept() > 0)
                .map_or(0, |i| i + 1)
        } else {
            n
        };
        for mut line in self.lines.drain(..n).take(shown) {
            commit_row(&mut line, &mut self.committed, &mut self.after_line, true, 0);
        }
        while self.lines.len() <= self.row {
            self.lines.push_back(Line::default());
        }
        self.bound_kept();
    }

    /// Scrolls down by `n` rows from the top (`ESC [ T`, reverse index at
    /// the top, whatever scroll region was set: regions are not tracked).
    /// On a screen the lines move down and what is printed next goes above
    /// them, though it comes after them; here the window is committed
    /// first, as when the screen is erased, so text keeps the order it was
    /// printed in. The cursor keeps its column.
    fn scroll_down(&mut self, n: usize) {
        if self.lines.iter().all(|line| line.len() == 0 && line.kept() == 0) {
            self.insert_lines(0, n);
            return;
        }
        let col = self.col;
        self.commit_window_lines();
        self.col = col.min(self.max_col());
    }

    /// Inserts `n` blank lines at row `at` (insert lines, and scrolling
    /// down over an empty window): the lines from `at` on move down, and those
    /// pushed past the last row are kept, each just above the line that
    /// took its row, as an erased line is. The cursor keeps its row.
    fn insert_lines(&mut self, at: usize, n: usize) {
        self.leave_row();
        let n = n.min(self.rows - at);
        while self.lines.len() < at {
            self.lines.push_back(Line::default());
        }
        if at > 0 {
            self.lines[at - 1].wrapped = false;
        }
        for _ in 0..n {
            self.lines.insert(at, Line::default());
        }
        while self.lines.len() > self.rows {
            let row = self.lines.len() - 1 - n;
            let line = self.lines.pop_back().expect("the window is not empty");
            let mut removed = String::new();
            line.keep_removed(&mut removed, &mut 0);
            end_line(&mut removed);
            let last = self.lines.len() - 1;
            self.lines[last].wrapped = false;
            self.lines[row].replaced.push_str(&removed);
        }
        // Blank rows below the cursor are implied, as after erase-below.
        while self.lines.len() > self.row + 1
            && self.lines.back().is_some_and(|line| line.len() == 0 && line.kept() == 0)
        {
            self.lines.pop_back();
        }
        while self.lines.len() <= self.row {
            self.lines.push_back(Line::default());
        }
        self.bound_kept();
    }

    /// Deletes `n` lines at the cursor (`ESC [ n M`): the lines below move
    /// up, and the deleted ones are kept just above the line that took the
    /// cursor's row, as an erased line is.
    fn delete_lines(&mut self, n: usize) {
        self.leave_row();
        let end = (self.row + n).min(self.lines.len());
        let (mut removed, mut blanks) = (String::new(), 0);
        for line in self.lines.drain(self.row..end) {
            line.keep_removed(&mut removed, &mut blanks);
        }
        end_line(&mut removed);
        if self.row > 0 {
            self.lines[self.row - 1].wrapped = false;
        }
        while self.lines.len() <= self.row {
            self.lines.push_back(Line::default());
        }
        let line = &mut self.lines[self.row];
        removed.push_str(&line.replaced);
        line.replaced = removed;
        self.col = 0;
        self.bound_kept();
    }

    /// Queues `answer` for the terminal, if a command is running to read it.
    fn respond(&mut self, answer: &[u8]) {
        if self.in_command && self.responses.len() + answer.len() <= RESPONSE_LIMIT {
            self.responses.extend_from_slice(answer);
        }
    }

    /// Answers a cursor-position query (`ESC [ 6 n`) with the 1-based row
    /// and column.
    fn answer_cursor_position(&mut self) {
        let (row, col) = match &self.alternate {
            Some(alternate) => {
                let (row, col) = alternate.parser.screen().cursor_position();
                (usize::from(row), usize::from(col))
            }
            None => (self.row, self.col.min(self.cols - 1)),
        };
        let answer = format!("\x1b[{};{}R", row + 1, col + 1);
        self.respond(answer.as_bytes());
    }

    fn marker(&self, params: &[&[u8]]) -> Option<Marker> {
        // ESC ] 6973 ; nonce ; S ; seq [; lines read] BEL,
        // ESC ] 6973 ; nonce ; E ; seq ; status BEL,  ESC ] 6973 ; nonce ; P ; seq BEL
        // or  ESC ] 6973 ; nonce ; L BEL
        let [osc, nonce, kind, rest @ ..] = params else { return None };
        if *osc != MARKER_OSC.as_bytes() || *nonce != self.nonce.as_slice() {
            return None;
        }
        let number = |bytes: &[u8]| std::str::from_utf8(bytes).ok()?.parse().ok();
        match (*kind, rest) {
            (b"S", [seq]) => Some(Marker::Start { seq: number(seq)?, lines_read: None }),
            (b"S", [seq, lines]) => {
                Some(Marker::Start { seq: number(seq)?, lines_read: Some(number(lines)?) })
            }
            (b"P", [seq]) => Some(Marker::Prompt { seq: number(seq)? }),
            (b"L", []) => Some(Marker::Editing),
            (b"E", [seq, status]) => {
                Some(Marker::End { seq: number(seq)?, status: number(status)? as i32 })
            }
            _ => None,
        }
    }

    /// Queries answered whatever screen is showing; true if `action` was
    /// one.
    fn query(&mut self, intermediates: &[u8], first: u16, action: char) -> bool {
        match (intermediates, action, first) {
            // Device status report: "OK".
            (b"", 'n', 5) => self.respond(b"\x1b[0n"),
            // Cursor position report.
            (b"", 'n', 6) if self.in_alternate() => self.pause = Some(Pause::CursorQuery),
            (b"", 'n', 6) => self.answer_cursor_position(),
            // Primary device attributes: a VT100 with advanced video.
            (b"", 'c', 0) => self.respond(b"\x1b[?1;2c"),
            // Secondary device attributes: a VT100, firmware version 10.
            (b">", 'c', 0) => self.respond(b"\x1b[>0;10;0c"),
            _ => return false,
        }
        true
    }
}

impl Perform for Renderer {
    #[inline]
    fn print(&mut self, c: char) {
        // DEL prints nothing on a terminal: a person sees the text around
        // it joined (and so must the masker).
        if c == '\x7f' {
            return;
        }
        if self.in_alternate() {
        } else if c.is_ascii() {
            self.print_ascii(c);
        } else {
            self.print_unicode(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if self.in_alternate() {
            return;
        }
        match byte {
            b'\n' | 0x0b | 0x0c => self.line_feed(),
            b'\r' => self.col = 0,
            // Backspace at the start of a row that a wrapped line goes on
            // to goes back to the row above, as in tmux.
            0x08 if self.col == 0 && self.row > 0 && self.lines[self.row - 1].wrapped => {
                self.set_row(self.row - 1);
                self.col = self.max_col();
            }
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => self.tab(),
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        if let Some(marker) = self.marker(params) {
            self.in_command = matches!(marker, Marker::Start { .. });
            self.autowrap = true;
            if !self.in_command {
                // Nobody is left to read them: the shell would take them
                // for typed input.
                self.responses.clear();
            }
            self.pause = Some(Pause::Stop(Stop::Marker(marker)));
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0);
        if intermediates == b"?" && matches!(action, 'h' | 'l') {
            if params.iter().any(|p| p.first() == Some(&1)) {
                self.cursor_keys =
                    if action == 'h' { CursorKeys::Application } else { CursorKeys::Normal };
            }
            let alternate = params.iter().any(|p| matches!(p.first(), Some(47 | 1047 | 1049)));
            let on = action == 'h';
            if params.iter().any(|p| p.first() == Some(&7)) {
                self.autowrap = on;
            }
            if alternate && on != self.in_alternate() {
                self.pause = Some(Pause::Stop(Stop::AlternateScreen(on)));
            }
            return;
        }
        if self.query(intermediates, first, action) {
            return;
        }
        if self.in_alternate() && intermediates.is_empty() {
            let limit = match action {
                '@' => self.cols,
                'L' | 'T' => self.rows,
                _ => usize::MAX,
            };
            if usize::from(first) > limit {
                self.pause = Some(Pause::Oversized(format!("\x1b[{limit}{action}")));
            }
            return;
        }
        if self.in_alternate() || !intermediates.is_empty() {
            return;
        }
        // Counts are at most 65535; every use below is clamped to the
        // window, so no count can grow a line or the window.
        let count = usize::from(first.max(1));
        match action {
            'K' => self.erase_in_line(first),
            'J' => match first {
                // Erase below: the rest of this line and the lines under it.
                0 => self.erase_below(),
                // Erase the whole screen: a person would see a blank
                // screen, but an agent loses nothing by keeping the text.
                _ => {
                    let n = self.lines.len();
                    self.commit_lines(n, true);
                }
            },
            'A' => {
                self.set_row(self.row.saturating_sub(count));
                self.col = self.col.min(self.max_col());
            }
            // Down stops at the last row, as on a real screen: it never
            // scrolls.
            'B' | 'e' => {
                self.move_to_row(self.row + count);
                self.col = self.col.min(self.max_col());
            }
            'C' | 'a' => self.col = (self.col.min(self.max_col()) + count).min(self.max_col()),
            // From the pending-wrap column, as tmux counts it.
            'D' => self.col = self.col.saturating_sub(count),
            'E' => {
                self.move_to_row(self.row + count);
                self.col = 0;
            }
            'F' => {
                self.set_row(self.row.saturating_sub(count));
                self.col = 0;
            }
            'G' | '`' => self.col = (count - 1).min(self.cols - 1),
            // Row N, the column kept (`tput vpa`): rows count as for `H`.
            'd' => {
                self.move_to_row(count - 1);
                self.col = self.col.min(self.max_col());
                self.place();
            }
            'H' | 'f' => {
                // Row 1 is the window's first row: the top of the screen
                // once the window fills it (a pager repainting its page in
                // place), and the first row of a command's output before.
                let col = params.iter().nth(1).and_then(|p| p.first().copied()).unwrap_or(1);
                self.move_to_row(count - 1);
                self.col = (usize::from(col.max(1)) - 1).min(self.cols - 1);
                self.place();
            }
            // Forward and backward tab stops.
            'I' => {
                let col = self.col.min(self.max_col());
                self.col = ((col / 8 + count) * 8).min(self.max_col());
            }
            'Z' => self.col = (self.col.div_ceil(8).saturating_sub(count)) * 8,
            'X' => {
                let col = self.col.min(self.max_col());
                let line = self.line();
                let end = (col + count).min(line.len());
                if col < end {
                    line.edit();
                    line.split_at(col);
                    line.split_at(end);
                    line.cells[col..end].fill(Cell::BLANK);
                }
            }
            'P' => {
                let col = self.col.min(self.max_col());
                let line = self.line();
                let end = (col + count).min(line.len());
                if col < end {
                    line.edit();
                    line.split_at(col);
                    line.split_at(end);
                    line.cells.drain(col..end);
                }
            }
            '@' => {
                // Insert blanks: what is pushed past the last column of a
                // line that fits the width is gone, as on a real screen.
                let (col, cols) = (self.col.min(self.max_col()), self.cols);
                let line = self.line();
                let n = count.min(cols.saturating_sub(col));
                if col < line.len() && n > 0 {
                    line.edit();
                    let keep = cols;
                    line.split_at(col);
                    line.cells.splice(col..col, std::iter::repeat_n(Cell::BLANK, n));
                    line.cells.truncate(keep);
                }
            }
            'L' => {
                // Insert lines: only into rows the window does not use yet,
                // so no line is pushed out and lost; with nothing below the
                // cursor to push down, there is nothing to do.
                let below_is_blank = self.lines.range(self.row..).all(|line| line.len() == 0);
                let n = if below_is_blank { 0 } else { count.min(self.rows - self.lines.len()) };
                if n > 0 && self.row > 0 {
                    self.lines[self.row - 1].wrapped = false;
                }
                for _ in 0..n {
                    self.lines.insert(self.row, Line::default());
                }
                // With no such rows, lines are pushed off the bottom, as on
                // a real screen, and kept: the cursor's row must be blank,
                // or what is printed there would mix with what was there.
                if !below_is_blank && n == 0 {
                    self.insert_lines(self.row, count);
                }
            }
            'M' => self.delete_lines(count),
            'S' => self.scroll_up(count),
            'T' => self.scroll_down(count),
            'b' => {
                // Repeat the last character, at most a width's worth.
                if let Some((c, wide)) = self.last_printed {
                    let n = count.min(if wide { self.cols / 2 } else { self.cols });
                    for _ in 0..n {
                        self.print_char(c);
                    }
                }
            }
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        if self.in_alternate() && intermediates.is_empty() && byte == b'c' {
            self.pause = Some(Pause::Reset);
        }
        if self.in_alternate() || !intermediates.is_empty() {
            return;
        }
        match byte {
            b'7' => {
                self.saved_cursor = (self.row, self.col);
                self.overlay = true;
            }
            b'8' => {
                self.overlay = false;
                let (row, col) = self.saved_cursor;
                self.move_to_row(row.min(self.lines.len() - 1));
                self.col = col.min(self.max_col());
            }
            // Reverse index: at the top it scrolls down.
            b'M' if self.row == 0 => self.scroll_down(1),
            b'M' => self.set_row(self.row - 1),
            b'D' | b'E' => self.line_feed(),
            _ => {}
        }
    }

    fn terminated(&self) -> bool {
        self.pause.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "\x1b]6973;n0nce;S;1\x07";
    const END: &str = "\x1b]6973;n0nce;E;1;3\x07";

    /// Feeds `input` in pieces of `split` bytes (0 = whole) and returns the
    /// committed text with markers and screen switches written inline, as
    /// the session handles them (an end marker commits the window and
    /// leaves a full-screen program's screen), then the answers to queries.
    /// After every piece the window must be within its bound.
    fn render(input: &[u8], split: usize) -> String {
        render_on(Screen::new(5, 80, "n0nce"), input, split)
    }

    /// [`render`] on `screen`, for a window of another size.
    fn render_on(mut screen: Screen, input: &[u8], split: usize) -> String {
        let mut out = String::new();
        let pieces: Vec<&[u8]> =
            if split == 0 { vec![input] } else { input.chunks(split).collect() };
        for piece in pieces {
            let mut rest = piece;
            while !rest.is_empty() {
                let (consumed, stop) = screen.feed(rest);
                rest = &rest[consumed..];
                match stop {
                    Some(Stop::Marker(marker)) => {
                        screen.commit_all();
                        if let Marker::End { .. } = marker {
                            screen.leave_alternate();
                        }
                        out.push_str(&screen.take_committed());
                        out.push_str(&format!("<{marker:?}>"));
                    }
                    Some(Stop::AlternateScreen(on)) => out.push_str(&format!("<alt {on}>")),
                    None => {}
                }
            }
            assert!(
                screen.window_cost() <= screen.window_bound(),
                "window holds {} bytes, bound {}",
                screen.window_cost(),
                screen.window_bound()
            );
        }
        if let Some(alternate) = screen.alternate_contents() {
            out.push_str(&format!("<screen {alternate:?}>"));
        }
        screen.commit_all();
        out.push_str(&screen.take_committed());
        let answers = screen.take_responses();
        if !answers.is_empty() {
            out.push_str(&format!("<answers {:?}>", String::from_utf8_lossy(&answers)));
        }
        out
    }

    /// Every case must render the same whole, split at every byte, and
    /// split into pieces of a few bytes.
    fn check(input: impl AsRef<[u8]>, expected: impl AsRef<str>) {
        check_on(5, 80, input, expected);
    }

    /// [`check`] on a window of `rows` by `cols`.
    fn check_on(rows: u16, cols: u16, input: impl AsRef<[u8]>, expected: impl AsRef<str>) {
        let (input, expected) = (input.as_ref(), expected.as_ref());
        for split in [0, 1, 2, 3, 7] {
            let out = render_on(Screen::new(rows, cols, "n0nce"), input, split);
            assert_eq!(out, expected, "split every {split} bytes");
        }
    }

    #[test]
    fn plain_lines() {
        check(b"hello\r\nworld\r\n", "hello\nworld\n");
        check(b"no newline", "no newline");
        check("caf\u{e9} \u{1F600}\r\n".as_bytes(), "caf\u{e9} \u{1F600}\n");
    }

    /// DEL prints nothing on a terminal: the text around it is joined, as
    /// a person sees it.
    #[test]
    fn del_is_dropped() {
        check(b"ghp_\x7fabc\x7f\x7fdef\r\n", "ghp_abcdef\n");
        check(b"\x7f\r\nx\x7f\r\n", "\nx\n");
    }

    #[test]
    fn carriage_return_progress_shows_the_final_state() {
        check(b"10%\r20%\r100%\r\ndone\r\n", "100%\ndone\n");
        check(b"downloading... 3/10\x1b[K\rdownloaded\x1b[K\r\n", "downloaded\n");
    }

    #[test]
    fn colours_and_titles_are_dropped() {
        check(b"\x1b[1;31mred\x1b[0m plain\r\n\x1b]0;title\x07x\r\n", "red plain\nx\n");
    }

    #[test]
    fn backspace_tabs_and_erase() {
        check(b"abc\x08\x08X\r\n", "aXc\n");
        check(b"a\tb\r\n", "a\tb\n");
        check(b"abcdefghij\r\tX\r\n", "abcdefghXj\n");
        check(b"abcdef\x1b[3D\x1b[K!\r\n", "abc!\n");
        check(b"abcdef\x1b[3D\x1b[1K!\r\n", "   !ef\n");
        check(b"abcdef\r\x1b[2X\x1b[2C\x1b[P\r\n", "  def\n");
        check(b"abc\r\x1b[2@x\r\n", "x abc\n");
    }

    #[test]
    fn cursor_up_rewrites_recent_lines() {
        // A two-line progress display redrawn in place.
        check(b"a: 1%\r\nb: 1%\r\n\x1b[2Aa: 100%\r\nb: 100%\r\n", "a: 100%\nb: 100%\n");
    }

    #[test]
    fn lines_that_scroll_out_of_the_window_are_final() {
        // The window is 5 lines, the cursor's empty line included: cursor
        // up stops at line 4, and lines 1 to 3 can no longer change. Line 4,
        // overwritten with another line, is kept above it.
        let input = b"1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7\r\n\x1b[9Ax\r\n";
        check(input, "1\n2\n3\n4\nx\n5\n6\n7\n");
    }

    /// `less` with git's `LESS=FRX` (no alternate screen) repaints its
    /// page in place, one row at a time by absolute position (`ESC [ N ; 1
    /// H`), ending rows with `\r\n` or not: each line is committed once,
    /// as a terminal shows it once.
    #[test]
    fn a_page_repainted_in_place_is_committed_once() {
        let page: String = (1..50).map(|n| format!("line {n}\r\n")).collect();
        let lines: String = (1..50).map(|n| format!("line {n}\n")).collect();
        let by_rows: String = (1..50).map(|n| format!("\x1b[{n};1Hline {n}\r\n")).collect();
        let by_moves: String = (1..50).map(|n| format!("\x1b[{n};1Hline {n}")).collect();
        for repaint in [by_rows, by_moves] {
            let input = format!("{page}:\r\x1b[K{repaint}\x1b[50;1H:");
            check_on(50, 120, input, format!("{lines}:"));
        }
    }

    /// A row chosen by its number alone (`ESC [ N d`, the column kept), as
    /// `tput vpa` and some pagers move: the same screen as with `ESC [ N H`.
    #[test]
    fn a_row_moved_to_by_number_alone_is_the_row_h_names() {
        check("a\r\nb\r\nc\x1b[2dX", "a\nbX\nc");
        check("a\r\nb\r\nc\x1b[dX\x1b[3dY", "aX\nb\nc Y");
        let page: String = (1..50).map(|n| format!("line {n}\r\n")).collect();
        let lines: String = (1..50).map(|n| format!("line {n}\n")).collect();
        let by_rows: String = (1..50).map(|n| format!("\x1b[{n}d\x1b[1Gline {n}")).collect();
        check_on(50, 120, format!("{page}:\r\x1b[K{by_rows}\x1b[50d\x1b[G:"), format!("{lines}:"));
    }

    /// A page repainted in place, row by row by number, with lines that
    /// share their first word with the lines they replace (a log paged by
    /// `less -X`): no line of either page is lost, none is doubled; the
    /// same text written again is kept once.
    #[test]
    fn a_page_repainted_with_lines_of_the_same_first_word_keeps_both_pages() {
        let page: String = (1..9).map(|n| format!("alpha {n}\r\n")).collect();
        let next: String =
            (1..5).map(|n| format!("\x1b[{n};1Halpha {}\x1b[K\r\n", n + 100)).collect();
        let by_number: String =
            (1..5).map(|n| format!("\x1b[{n}d\ralpha {}\x1b[K", n + 100)).collect();
        // The same page painted again, then another: each line once.
        let again: String = (5..9).map(|n| format!("\x1b[{};1Halpha {n}\x1b[K", n - 4)).collect();
        let both = "alpha 1\nalpha 2\nalpha 3\nalpha 4\n\
                    alpha 5\nalpha 101\nalpha 6\nalpha 102\nalpha 7\nalpha 103\nalpha 8\nalpha 104\n:";
        check(format!("{page}:\r\x1b[K{next}\x1b[5;1H:"), both);
        check(format!("{page}:\r\x1b[K{by_number}\x1b[5d\r:"), both);
        check(format!("{page}:\r\x1b[K{again}{next}\x1b[5;1H:"), both);
    }

    /// A row the cursor only passed through by its number is judged as
    /// usual when a progress line is redrawn there later (cursor up and
    /// `\r`): its frames are not kept.
    #[test]
    fn a_row_passed_through_by_number_still_keeps_one_progress_frame() {
        check(
            "x\r\nDownloading 1%\r\n\x1b[2;1H\x1b[3;1H\x1b[1A\r\x1b[KDownloading 2%\r\n",
            "x\nDownloading 2%\n",
        );
    }

    /// A progress bar drawn on a row chosen by number between a saved and
    /// a restored cursor (`apt` on its last row) keeps one frame, as one
    /// redrawn by `\r`; the lines printed meanwhile are all kept.
    #[test]
    fn an_overlay_bar_placed_by_number_keeps_one_frame() {
        let bar = |p: u32| format!("\x1b7\x1b[5;1HProgress: [{p:3}%]\x1b[K\x1b8");
        let input = format!("a\r\n{}b\r\n{}c\r\n{}", bar(10), bar(20), bar(30));
        check(input, "a\nb\nc\n\nProgress: [ 30%]");
    }

    /// Before the window fills the screen, row 1 is the first row of the
    /// window, where the command's output began: a real terminal's top row
    /// once the screen was cleared.
    #[test]
    fn row_one_is_the_first_row_of_a_short_window() {
        let page: String = (1..6).map(|n| format!("line {n}\r\n")).collect();
        let lines: String = (1..6).map(|n| format!("line {n}\n")).collect();
        check_on(50, 120, format!("{page}:\r\x1b[K\x1b[1;1Hline 1"), &lines);
        check_on(50, 120, format!("{page}\x1b[Hline 1\x1b[3;1Hline 3\x1b[6;1H"), &lines);
    }

    /// A pager showing its next page by repainting the rows of the screen
    /// with other lines, each erased to its end: the lines that scrolled off before are committed
    /// once, and each line of the old page, overwritten by another line,
    /// once, just above the line that replaced it, and the new page's once.
    #[test]
    fn a_page_repainted_with_other_lines_keeps_both_pages_once() {
        let page: String = (1..9).map(|n| format!("alpha {n}\r\n")).collect();
        let next: String = (1..5).map(|n| format!("\x1b[{n};1Hbeta {n}\x1b[K\r\n")).collect();
        check(
            format!("{page}:\r\x1b[K{next}\x1b[5;1H:"),
            "alpha 1\nalpha 2\nalpha 3\nalpha 4\n\
             alpha 5\nbeta 1\nalpha 6\nbeta 2\nalpha 7\nbeta 3\nalpha 8\nbeta 4\n:",
        );
    }

    #[test]
    fn markers_need_the_nonce_and_split_the_stream() {
        check(
            b"echo\x1b]6973;n0nce;S;4\x07out\r\n\x1b]6973;n0nce;E;4;0\x07",
            "echo<Start { seq: 4, lines_read: None }>out\n<End { seq: 4, status: 0 }>",
        );
        // The shell's count of the lines it read, after the number.
        check(
            b"\x1b]6973;n0nce;S;5;17\x07out\r\n",
            "<Start { seq: 5, lines_read: Some(17) }>out\n",
        );
        // Wrong nonce, malformed fields, or OpenHands-style text: ignored.
        check(
            b"\x1b]6973;guess;E;4;0\x07\x1b]6973;n0nce;E;x;0\x07###PS1JSON###\r\n",
            "###PS1JSON###\n",
        );
        check(b"a\x1b]6973;n0nce;E;9;130\x1b\\b", "a<End { seq: 9, status: 130 }>b");
        // The prompt printed while a command runs.
        check(b"out\r\n\x1b]6973;n0nce;P;5\x07", "out\n<Prompt { seq: 5 }>");
        check(b"\x1b]6973;n0nce;P;5;0\x07\x1b]6973;n0nce;P;x\x07", "");
    }

    #[test]
    fn full_screen_programs_show_their_screen_and_keep_their_last_one() {
        // Leaving keeps the last screen, once, where it was left.
        check(
            b"before\r\n\x1b[?1049h\x1b[2J\x1b[Htop line\x1b[3;1Hthird\x1b[?1049lafter\r\n",
            "<alt true><alt false>before\ntop line\n\nthird\nafter\n",
        );
        check(b"\x1b[?1049h\x1b[Hhello vim", "<alt true><screen \"hello vim\">");
        // Counts the emulator would loop over are clamped to the window.
        check(
            b"\x1b[?1049habc\r\x1b[65535@x\r\n\x1b[65535L\x1b[65535Ty",
            "<alt true><screen \"\\ny\">",
        );
        check(b"\x1b[?1049habc\r\x1b[2@x", "<alt true><screen \"x abc\">");
        // A bare line feed starts a new line there too (top prints lines).
        check(b"\x1b[?1049htop\n  line\r\n", "<alt true><screen \"top\\n  line\">");
        // Each visit starts on a blank screen: nothing stale from the last.
        check(
            b"\x1b[?1049hfirst visit\x1b[?1049l\x1b[?1049h\x1b[2;1Hsecond",
            "<alt true><alt false><alt true><screen \"\\nsecond\">first visit\n",
        );
        // A blank view leaves nothing.
        check(b"\x1b[?1049h\x1b[2J\x1b[?1049lafter\r\n", "<alt true><alt false>after\n");
    }

    /// The cursor-key mode (DECCKM) follows the program, on either screen
    /// and with other modes in the same sequence, whole or split anywhere.
    #[test]
    fn the_cursor_key_mode_follows_the_program() {
        use CursorKeys::{Application, Normal};
        let cases: &[(&[u8], CursorKeys)] = &[
            (b"plain text", Normal),
            (b"\x1b[?1h", Application),
            (b"\x1b[?1h\x1b=abc\x1b[?1l\x1b>", Normal),
            (b"\x1b[?1049h\x1b[?1h\x1b=menu", Application),
            (b"\x1b[?1049h\x1b[?1h\x1b[?1049l", Application),
            (b"\x1b[?1049;1h", Application),
            (b"\x1b[?1h\x1b[?12l\x1b[?25l\x1b[?1000h", Application),
            // Other modes, and ANSI mode 1 (no `?`), are not it.
            (b"\x1b[?12h\x1b[?1000h\x1b[1h", Normal),
        ];
        for (input, expected) in cases {
            for split in 0..=input.len() {
                let mut screen = Screen::new(24, 80, "n0nce");
                for part in [&input[..split], &input[split..]] {
                    let mut done = 0;
                    while done < part.len() {
                        done += screen.feed(&part[done..]).0;
                    }
                }
                let shown = String::from_utf8_lossy(input);
                assert_eq!(screen.cursor_keys(), *expected, "{shown:?} split at {split}");
            }
        }
    }

    /// Issue 18: the selected item of a full-screen list is visible: a row
    /// with text in reverse video starts with the mark, whatever the split.
    #[test]
    fn reverse_video_rows_are_marked_on_a_full_screen() {
        let menu = "\x1b[?1049h\x1b[H  apples\r\n\x1b[7m  pears \x1b[0m\r\n  plums";
        check(menu, "<alt true><screen \"  apples\\n▶   pears\\n  plums\">");
        // Moving the selection moves the mark.
        check(
            format!("{menu}\x1b[2;1H\x1b[0m  pears \x1b[3;1H\x1b[7m  plums\x1b[m"),
            "<alt true><screen \"  apples\\n  pears\\n▶   plums\">",
        );
        // A reversed word inside a row marks the row, not the word; a
        // reversed blank (a program's own cursor) marks nothing.
        check(
            "\x1b[?1049hname: \x1b[7mvalue\x1b[27m ok\r\n> typed\x1b[7m \x1b[0m",
            "<alt true><screen \"▶ name: value ok\\n> typed\">",
        );
        // A screen left unclosed is committed with its marks.
        check(
            format!("{START}\x1b[?1049h\x1b[7mchosen\x1b[0m\r\nother{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>▶ chosen\nother\n<End { seq: 1, status: 3 }>",
        );
        // Text on another background than the rest (a coloured selection
        // bar, as `ncdu` and `htop` draw it) is highlighted too.
        check(
            "\x1b[?1049h\x1b[40mtitle\r\n\x1b[42m big\x1b[40m\r\n small\r\n\x1b[42m \x1b[0m",
            "<alt true><screen \"title\\n▶  big\\n small\">",
        );
        // Two long bars on one colour do not outweigh a list of short rows
        // on another (ncdu where the locale is not UTF-8: its title and
        // status bars, and no line drawing on the list's own background).
        let bar = "x".repeat(70);
        check(
            format!(
                "\x1b[?1049h\x1b[46m{bar}\r\n\x1b[40m/dir\r\n\x1b[42m big\r\n\x1b[40m \
                 medium\r\n\x1b[46m{bar}\x1b[0m"
            ),
            format!("<alt true><screen \"▶ {bar}\\n/dir\\n▶  big\\n medium\\n▶ {bar}\">"),
        );
        // Reverse video on the normal screen is text as any other.
        check("\x1b[7mplain\x1b[0m\r\n", "plain\n");
    }

    /// Issue 6: an empty vim screen was 93 % spaces.
    #[test]
    fn full_screen_views_have_no_trailing_spaces_or_blank_rows() {
        // Rows padded with spaces to the width, as vim draws its `~` rows.
        let mut input = b"\x1b[?1049h\x1b[H".to_vec();
        for row in 1..=4 {
            input.extend(format!("\x1b[{row};1H~{}", " ".repeat(79)).as_bytes());
        }
        input.extend(b"\x1b[1;1Hx");
        check(&input, "<alt true><screen \"x\\n~\\n~\\n~\">");
        check(b"\x1b[?1049h\x1b[2;3Hmid   \x1b[5;1H     ", "<alt true><screen \"\\n  mid\">");
    }

    /// Issue 7: output printed on the alternate screen is kept when the
    /// program (or the shell) never leaves it.
    #[test]
    fn leaving_without_the_closing_sequence_keeps_the_screen() {
        check(
            format!("{START}\x1b[?1049hIMPORTANT\r\n{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>IMPORTANT\n<End { seq: 1, status: 3 }>",
        );
        // Text before the switch comes first, on a line of its own.
        check(
            format!("{START}working\x1b[?1049hTraceback\r\n  boom\r\n{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>working\nTraceback\n  boom\n<End { seq: 1, status: 3 }>",
        );
        // A traceback longer than the screen: what scrolled off is kept.
        let lines: String = (1..=8).map(|n| format!("line {n}\r\n")).collect();
        check(
            format!("{START}\x1b[?1049h{lines}{END}"),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><alt true>{}<End {{ seq: 1, status: 3 }}>",
                (1..=8).map(|n| format!("line {n}\n")).collect::<String>()
            ),
        );
        // With the closing sequence too: a line printed there and wiped
        // by leaving is still a line the command printed.
        for mode in ["47", "1047", "1049"] {
            check(
                format!("{START}\x1b[?{mode}hFATAL\r\n\x1b[?{mode}lok\r\n{END}"),
                "<Start { seq: 1, lines_read: None }><alt true><alt false>FATAL\nok\n<End { seq: 1, status: 3 }>",
            );
        }
    }

    /// Issue 19, F13: every way onto the alternate screen (`?47`, `?1047`,
    /// `?1049`) is one: what a command printed there is kept when it never
    /// leaves, and a full reset (`ESC c`) there leaves it keeping what it
    /// showed, as if the program had ended there.
    #[test]
    fn every_alternate_screen_and_a_reset_on_it_keep_what_was_printed() {
        for mode in ["47", "1047", "1049"] {
            check(
                format!("{START}\x1b[?{mode}hFATAL\r\n{END}"),
                "<Start { seq: 1, lines_read: None }><alt true>FATAL\n<End { seq: 1, status: 3 }>",
            );
            let lines: String = (1..=8).map(|n| format!("line {n}\r\n")).collect();
            check(
                format!("{START}\x1b[?{mode}h{lines}{END}"),
                format!(
                    "<Start {{ seq: 1, lines_read: None }}><alt true>{}<End {{ seq: 1, status: 3 }}>",
                    (1..=8).map(|n| format!("line {n}\n")).collect::<String>()
                ),
            );
            check(
                format!("{START}before\r\n\x1b[?{mode}hFATAL\r\n\x1bcafter\r\n{END}"),
                "<Start { seq: 1, lines_read: None }><alt true><alt false>before\nFATAL\nafter\n<End { seq: 1, status: 3 }>",
            );
        }
        // A reset off the alternate screen changes nothing.
        check(
            format!("{START}a\r\n\x1bcb\r\n{END}"),
            "<Start { seq: 1, lines_read: None }>a\nb\n<End { seq: 1, status: 3 }>",
        );
    }

    /// Issue 6: wide characters take two columns.
    #[test]
    fn wide_characters_take_two_columns() {
        check("abc\r中文\r\n", "中文\n");
        check("中文x\r\x1b[4Cy\r\n", "中文y\n");
        // Overwriting either half of a wide character blanks the other.
        check("a中b\r\x1b[1Cx\r\n", "ax b\n");
        check("a中b\r\x1b[2Cx\r\n", "a xb\n");
        check("😀😀\r\x1b[1C\x1b[K!\r\n", " !\n");
        // Zero-width characters stay with the character they follow.
        check("e\u{301}x\r\x1b[1Cy\r\n", "e\u{301}y\n");
        check("\u{2764}\u{fe0f} ok\r\n", "\u{2764}\u{fe0f} ok\n");
        check(
            "\u{1F468}\u{200d}\u{1F469}\u{200d}\u{1F467}!\r\n",
            "\u{1F468}\u{200d}\u{1F469}\u{200d}\u{1F467}!\n",
        );
        check("e\u{301}\rx\r\n", "x\n");
        // A long run of combining marks is kept, past what a cell holds.
        let zalgo: String = std::iter::repeat_n('\u{301}', 40).collect();
        check(format!("a{zalgo}\r\n"), format!("a{zalgo}\n"));
    }

    /// Issue 7: no count, position or repetition grows a line or the window
    /// past the window's size.
    #[test]
    fn cursor_movement_is_bounded_by_the_window() {
        let last_col = |text: &str| format!("{}{text}", " ".repeat(79));
        check(format!("{}x", "\x1b[65535C".repeat(4000)), last_col("x"));
        check(b"\x1b[65535ax", last_col("x"));
        check(b"\x1b[65535Gx", last_col("x"));
        check(b"\x1b[65535`x", last_col("x"));
        check(b"\x1b[1;65535Hx", last_col("x"));
        // Absolute positioning (`H`, `f`, `d`) stops at the last row, as
        // cursor down does.
        check(b"\x1b[65535;65535fx", format!("\n\n\n\n{}", last_col("x")));
        check(b"\x1b[65535Ix", last_col("x"));
        check(b"\x1b[65535dx", "\n\n\n\nx");
        // Down stops at the last of the window's 5 rows, and never scrolls.
        check(format!("{}x", "\x1b[65535B".repeat(4000)), "\n\n\n\nx");
        check(b"\x1b[2ex\x1b[65535Ey", "\n\nx\n\ny");
        // Insertion: what is pushed past the width is gone.
        check(b"abc\r\x1b[65535@x", "x");
        check(b"a\r\n\x1b[65535Lb", "a\nb");
        check(b"a\r\nc\r\x1b[65535Lb", "a\nb\n\n\nc");
        // Repetition: at most a width's worth.
        check(b"x\x1b[65535b", "x".repeat(81));
        // Tabs stop at the last column, and there do nothing (as in tmux).
        check(format!("{}x", "\t".repeat(100)), format!("{}x", "\t".repeat(10)));
        check(b"abc\r\x1b[65535C\x1b[65535Zx", "xbc");
    }

    /// Issue 18: lines wrap at the width, as xterm and tmux wrap them, so
    /// a program that moves up over a line it knows has wrapped lands on
    /// the right row; a wrapped line still comes back as one line.
    #[test]
    fn lines_wrap_at_the_width() {
        let a = |n: usize| "A".repeat(n);
        // The issue's case (`printf 'first\n%-120sX\e[1A\r\e[2KREPLACED\n\nend\n'
        // AAAA` on 120 columns; here 80): `X` wrapped to a row of its own,
        // so up goes to the row of `A`s. Erased, that row is kept above
        // what replaced it (output cannot hide output).
        let padded = format!("{:<80}", "AAAA");
        check(
            format!("first\r\n{padded}X\x1b[1A\r\x1b[2KREPLACED\r\n\r\nend\r\n"),
            "first\nAAAA\nREPLACED\nX\nend\n",
        );
        // Overwritten without an erase: the same line, its rows joined.
        let ones = "1".repeat(80);
        check(format!("{ones}X\x1b[1A\r2\r\n\r\n"), format!("2{}X\n", &ones[1..]));
        // A wrapped line is one line, blanks at the wrap included.
        check(format!("{padded}tail\r\n"), format!("{padded}tail\n"));
        check(format!("{}\r\n", a(200)), format!("{}\n", a(200)));
        // Blanks at the end of a line are dropped, however many rows they
        // take.
        check(format!("x{}\r\nnext\r\n", " ".repeat(300)), "x\nnext\n");
        check(format!("x{}y\r\n", " ".repeat(300)), format!("x{}y\n", " ".repeat(300)));
        // Exactly the width, then a newline: one line, no empty one after
        // it (the cursor waits in the last column; the newline does not
        // wrap).
        check(format!("{}\r\nnext\r\n", a(80)), format!("{}\nnext\n", a(80)));
        // At the pending wrap, `\r` goes back to the start of the same row,
        // and up counts rows, not lines.
        check(format!("{}\rB\r\n", a(80)), format!("B{}\n", a(79)));
        check(format!("x\r\n{}y\x1b[2A\rx2\r\n\r\n\r\n", a(80)), format!("x2\n{}y\n", a(80)));
        // A line drawn to the width and redrawn in place, as `uv` and
        // other `indicatif` displays draw (no newline: the next row starts
        // by wrapping): its final state only.
        let frame = |n: usize| format!("{:<80}", format!("Resolving {n}/50"));
        let frames: String = (0..50).map(|n| format!("{}\r\x1b[2K", frame(n))).collect();
        check(format!("{frames}Resolved 50\r\n"), "Resolved 50\n");
        // Two rows drawn to the width with no newline, redrawn by going up
        // one row: the line printed above them stays, in order.
        let mut uv = String::from("Resolved 5 packages\r\n");
        for n in 0..20 {
            if n > 0 {
                uv.push_str("\x1b[1A\r\x1b[2K\x1b[1B\r\x1b[2K\x1b[1A");
            }
            uv.push_str(&format!("{:<80}{:<80}", format!("Preparing {n}/20"), "  rich ---"));
        }
        uv.push_str("\x1b[1A\r\x1b[2K\x1b[1B\r\x1b[2K\x1b[1APrepared 5 packages\r\ndone\r\n");
        check(uv, "Resolved 5 packages\nPrepared 5 packages\ndone\n");
        // Wide characters that do not fit in the last column wrap whole.
        check(format!("{}中文\r\n", a(79)), format!("{}中文\n", a(79)));
        // Backspace at the start of a wrapped row goes back up.
        let ones = "1".repeat(79);
        check(format!("{ones}BC\x08\x08\x082\r\n\r\n"), format!("{}2BC\n", &ones[1..]));
        // Erasing from the middle of a wrapped row keeps the line joined,
        // the erased cells blank.
        let ones = "1".repeat(80);
        check(
            format!("{ones}X\x1b[1A\r\x1b[5C\x1b[K2\r\n\r\n"),
            format!("111112{}X\n", " ".repeat(74)),
        );
        // A continuation overwritten with another line: the line stays
        // whole, and what was erased from it comes after it.
        check(format!("{}tail\r\n\x1b[1A\rother\r\n", a(80)), format!("{}other\ntail\n", a(80)));
        // Erasing its continuation whole ends the line there.
        check(format!("{}XY\r\x1b[Kz\r\n", a(80)), format!("{}\nz\n", a(80)));
        check(format!("{}XY\r\x1b[Jz\r\n", a(80)), format!("{}\nz\n", a(80)));
        // Erase at the pending wrap erases nothing; the next character wraps.
        check(format!("{}\x1b[Kxy\r\n", a(80)), format!("{}xy\n", a(80)));
        // Cursor left counts from the pending-wrap column, as tmux counts.
        check(format!("{}\x1b[2DX\r\n", a(80)), format!("{}X{}\n", a(78), a(1)));
    }

    /// Issue 18: autowrap off (`ESC [ ? 7 l`) overwrites the last column,
    /// as a terminal does; a marker turns it on again.
    #[test]
    fn autowrap_off_overwrites_the_last_column() {
        let a = |n: usize| "a".repeat(n);
        check(format!("\x1b[?7l{}XYZ\r\nnext\r\n", a(79)), format!("{}Z\nnext\n", a(79)));
        check(format!("\x1b[?7l{}中\r\n", a(79)), format!("{}\n", a(79)));
        check(format!("\x1b[?7l\x1b[?7h{}XY\r\n", a(79)), format!("{}XY\n", a(79)));
        check(
            format!("{START}\x1b[?7l{END}{}XY\r\n", a(79)),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><End {{ seq: 1, status: 3 }}>{}XY\n",
                a(79)
            ),
        );
    }

    /// Issue 7: a line with no newline costs about its own size; `\r` then
    /// rewrites only the row the cursor is on. Issue 18: a long line wraps
    /// at the width, as on a terminal, and its rows that scroll off the
    /// window are final.
    #[test]
    fn long_lines_commit_their_beginning() {
        let a = |n: usize| "a".repeat(n);
        check(a(10_000), a(10_000));
        // 125 rows of 80: `\r` goes to the start of the last one, which is
        // full (the cursor waits there to wrap).
        check(format!("{}\rb", a(10_000)), format!("{}b{}", a(9920), a(79)));
        check(format!("{}\rb", a(10_001)), format!("{}b", a(10_000)));
        check(format!("{}\r\n", a(4096)), format!("{}\n", a(4096)));
        // A wide character is never cut in half.
        let wide = "中".repeat(5_000);
        check(format!("{wide}\r\n"), format!("{wide}\n"));

        let mut screen = Screen::new(50, 200, "n0nce");
        let line = vec![b'x'; 1 << 20];
        for _ in 0..4 {
            assert_eq!(screen.feed(&line), (line.len(), None));
            assert!(screen.take_committed().len() >= line.len() - 50 * 200);
            assert!(screen.window_cost() <= screen.window_bound());
            assert!(screen.current_line().len() <= 50 * 200);
        }
    }

    /// docs/terminal.md states the bound for the session's 50x200 window.
    #[test]
    fn the_default_window_is_bounded_under_six_megabytes() {
        let screen = Screen::new(50, 200, "n0nce");
        assert!(screen.window_bound() < 6_000_000, "{}", screen.window_bound());
        assert!(screen.window_cost() < 10_000, "{}", screen.window_cost());
    }

    /// Issue 6: `ESC [ 6 n`, `ESC [ c` and `ESC [ > c` are answered while a
    /// command runs, and never at the prompt.
    #[test]
    fn queries_are_answered_while_a_command_runs() {
        let answers = |text: &str| format!("<answers {text:?}>");
        check(
            format!("{START}abc\x1b[6n"),
            format!("<Start {{ seq: 1, lines_read: None }}>abc{}", answers("\x1b[1;4R")),
        );
        check(
            format!("{START}x\r\ny\x1b[5n"),
            format!("<Start {{ seq: 1, lines_read: None }}>x\ny{}", answers("\x1b[0n")),
        );
        check(
            format!("{START}a\r\n\x1b[65535C\x1b[6n"),
            format!("<Start {{ seq: 1, lines_read: None }}>a\n{}", answers("\x1b[2;80R")),
        );
        check(
            format!("{START}\x1b[c\x1b[>c"),
            format!("<Start {{ seq: 1, lines_read: None }}>{}", answers("\x1b[?1;2c\x1b[>0;10;0c")),
        );
        // On the alternate screen, the full-screen emulator's cursor.
        check(
            format!("{START}\x1b[?1049h\x1b[3;5Hab\x1b[6n"),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><alt true><screen \"\\n\\n    ab\">{}",
                answers("\x1b[3;7R")
            ),
        );
        // At the prompt, or once the command has ended: no answer.
        check(b"\x1b[6n\x1b[c", "");
        check(
            format!("{START}\x1b[6n{END}"),
            "<Start { seq: 1, lines_read: None }><End { seq: 1, status: 3 }>",
        );
        // A flood of queries is answered up to the limit.
        let flood = render(format!("{START}{}", "\x1b[c".repeat(10_000)).as_bytes(), 0);
        assert!(flood.len() < 2 * RESPONSE_LIMIT, "{}", flood.len());
    }

    /// Issue 7: a control string of any length costs at most
    /// [`STRING_LIMIT`] bytes. Issue 11: past that it is not one, and all
    /// of it is text.
    #[test]
    fn long_strings_are_abandoned_as_text() {
        let t = "t".repeat(100_000);
        check(format!("\x1b]0;{t}\x07after\r\n"), format!("]0;{t}after\n"));
        check(
            format!("\x1b]0;{t}\x07after\r\n{START}"),
            format!("]0;{t}after\n<Start {{ seq: 1, lines_read: None }}>"),
        );
        let u = "u".repeat(50_000);
        check(format!("\x1b]8;;{u}\x1b\\link\r\n"), format!("]8;;{u}link\n"));
        check(format!("\x1bP{u}\x1b\\x\r\n"), format!("P{u}x\n"));
        check(format!("\x1b_{u}\x1b\\x\r\n"), format!("_{u}x\n"));
        // Up to the limit, a string is one, and is not shown.
        let fits = "v".repeat(STRING_LIMIT - 4);
        check(format!("\x1b]0;{fits}\x07after\r\n"), "after\n");
        check(format!("\x1b_{fits}ab\x1b\\after\r\n"), "after\n");
        // A CSI sequence longer than any real one.
        let params = "1;".repeat(200);
        check(format!("\x1b[{params}mx\r\n"), format!("[{params}mx\n"));
        // What is held never exceeds the limit, whatever is fed.
        let mut screen = Screen::new(5, 80, "n0nce");
        let huge = [b"\x1b]0;".as_slice(), &vec![b'x'; 10 << 20]].concat();
        for piece in huge.chunks(4096) {
            assert_eq!(screen.feed(piece), (piece.len(), None));
            assert!(screen.held.bytes.len() <= STRING_LIMIT + 1);
            assert!(screen.window_cost() <= screen.window_bound());
            screen.take_committed();
        }
    }

    /// Issue 11: an escape sequence that never ends (every kind `vte`
    /// buffers or swallows) hides nothing after it: a line feed, another
    /// sequence, a byte it cannot hold or the end of the command abandons
    /// it, and its bytes after the ESC are text.
    #[test]
    fn stray_sequences_never_hide_later_text() {
        // The hostile repro: `printf '\e]8;;'; echo done`.
        check(b"\x1b]8;;done\r\n", "]8;;done\n");
        check(b"\x1b]0;done\nnext\r\n", "]0;done\nnext\n");
        // DCS (sixel), SOS, PM, APC (kitty graphics).
        check(b"\x1bPq#0;2;0;0;0done\r\nok\r\n", "Pq#0;2;0;0;0done\nok\n");
        check(b"\x1bXsos done\r\n", "Xsos done\n");
        check(b"\x1b^pm done\r\n", "^pm done\n");
        check(b"\x1b_Gf=100;done\r\n", "_Gf=100;done\n");
        // A CSI sequence: digits and `;` are parameters, so `printf '\e[';
        // seq 1 3` lost every number.
        check(b"\x1b[1\r\n2\r\n3\r\n", "[1\n2\n3\n");
        check(b"\x1b[12;\xc3\xa9t\xc3\xa9\r\n", "[12;\u{e9}t\u{e9}\n");
        check(b"\x1b[?25\x1b[1mbold\r\n", "[?25bold\n");
        // An escape with intermediates swallows spaces and punctuation.
        check(b"\x1b(  ---\r\n", "(  ---\n");
        check(b"a\x1b\r\nb", "a\nb");
        check(b"a\x1b\x1b\x1b[1mb", "ab");
        // Another sequence interrupts a string: the string was not one.
        check(b"\x1b]0;title\x1b[1mbold\r\n", "]0;titlebold\n");
        // At the end of the command (its end marker, or the session ending
        // it), whatever is held is abandoned.
        // (A CSI sequence ends at its first letter: text that starts with
        // one completes it.)
        let open = [
            ("\x1b]8;;", "done"),
            ("\x1bP", "done"),
            ("\x1b_", "done"),
            ("\x1bX", "done"),
            ("\x1b^", "done"),
            ("\x1b[", "42"),
            ("\x1b[1;2", "42"),
            ("\x1b(", " --"),
        ];
        for (open, text) in open {
            let shown = format!("{}{text}", &open[1..]);
            check(
                format!("{START}{open}{text}{END}"),
                format!(
                    "<Start {{ seq: 1, lines_read: None }}>{shown}<End {{ seq: 1, status: 3 }}>"
                ),
            );
            check(format!("{open}{text}"), &shown);
            check(format!("x{open}{text}\r\ny"), format!("x{shown}\ny"));
        }
        // A stray ESC right before the marker, or inside a string's end.
        check(
            format!("{START}done\x1b{END}"),
            "<Start { seq: 1, lines_read: None }>done<End { seq: 1, status: 3 }>",
        );
        check(
            format!("{START}\x1b]0;t\x1b{END}"),
            "<Start { seq: 1, lines_read: None }>]0;t<End { seq: 1, status: 3 }>",
        );
        // On a full-screen view too.
        check(
            format!("{START}\x1b[?1049h\x1b]8;;FIRST\r\nnext\r\n{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>]8;;FIRST\nnext\n<End { seq: 1, status: 3 }>",
        );
    }

    /// Sequences that end as they should still mean what they say, and
    /// CAN and SUB cancel one, as a terminal does.
    #[test]
    fn whole_sequences_still_work() {
        check(b"\x1b]0;title\x07a\x1b]0;title\x1b\\b\r\n", "ab\n");
        check(b"\x1bP1$r0m\x1b\\a\x1b_Gi=1;AAAA\x1b\\b\x1bXs\x07c\r\n", "abc\n");
        check(b"\x1b]0;title\x18a\x1b[1;2\x1ab\x1bPq\x18c\x1b(\x18d\r\n", "abcd\n");
        check(b"\x1b[1;31mred\x1b[0m \x1b(Bplain\x1b\\\r\n", "red plain\n");
        // A control inside a CSI sequence acts where it stands.
        check(b"abc\x1b[\x082D!\r\n", "!bc\n");
        check(b"abcdef\x1b[3\x1b[D!\r\n", "abcdef[!\n");
    }

    /// Issue 11: whatever precedes it, a stray sequence never hides the
    /// text after a line feed, and never hides the end marker.
    #[test]
    fn no_stream_hides_the_next_line_or_the_marker() {
        const TOKENS: &[&[u8]] = &[
            b"\x1b",
            b"\x1b",
            b"[",
            b"]",
            b"P",
            b"X",
            b"^",
            b"_",
            b"\\",
            b"(",
            b" ",
            b"\x07",
            b"\x18",
            b"\x1a",
            b"1",
            b";",
            b"?",
            b"m",
            b"H",
            b"A",
            b"K",
            b"J",
            b"\r",
            b"\x08",
            b"\t",
            b"\xc3\xa9",
            b"\xe4\xb8\xad",
            b"\xc3",
            b"\x9b",
            b"\x9c",
            b"x",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b]0;",
            b"\x1b[2A",
            b"\x1b[2K",
            b"\x1b[65535C",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let count = 1 + next() % 24;
            let prefix: Vec<u8> = (0..count)
                .flat_map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
                .copied()
                .collect();
            let split = [0, 1, 3][(next() % 3) as usize];
            let shown = String::from_utf8_lossy(&prefix);
            let out = render(&[&prefix, b"\nVISIBLE\r\n".as_slice()].concat(), split);
            assert!(out.contains("VISIBLE"), "{shown:?} split {split}: {out:?}");
            let out = render(&[START.as_bytes(), &prefix, END.as_bytes()].concat(), split);
            assert!(
                out.ends_with("<End { seq: 1, status: 3 }>"),
                "{shown:?} split {split}: {out:?}"
            );
        }
    }

    /// Issue 11: a line erased or overwritten after it was seen is kept
    /// above what replaced it (the hostile repros and their variants).
    #[test]
    fn erased_lines_are_kept() {
        // `echo FATAL >&2; printf '\e[1A\e[2K\e[1A\e[2Kall 120 tests passed\n'`
        check(
            "FATAL: 3 tests FAILED\r\n\x1b[1A\x1b[2K\x1b[1A\x1b[2Kall 120 tests passed\r\n",
            "FATAL: 3 tests FAILED\nall 120 tests passed\n",
        );
        // Overwritten after `\r`, with no erase at all.
        check("FATAL: boom\r\n\x1b[1A\rall passed \r\n", "FATAL: boom\nall passed\n");
        check("FATAL: boom\r\n\x1b[A\x1b[Gok\r\n", "FATAL: boom\nokTAL: boom\n");
        // Erased and left blank: the erased text stands for the line.
        check("FATAL\r\n\x1b[1A\x1b[2K", "FATAL\n");
        check("FATAL\r\nnext\r\n\x1b[2A\x1b[2K\x1b[2B", "FATAL\nnext\n");
        // Erased below, from the top of what was printed.
        check("FATAL\r\nsecond\r\n\x1b[2A\x1b[Jok\r\n", "FATAL\nok\nsecond\n");
        check("FATAL\r\nsecond\r\n\x1b[2A\x1b[J", "FATAL\nsecond\n");
        // Erased with the whole screen.
        check("FATAL\r\n\x1b[2J\x1b[Hall passed\r\n", "FATAL\nall passed\n");
        // Characters deleted, erased or pushed away.
        check("FATAL error\r\n\x1b[A\x1b[6P\r\n", "FATAL error\nerror\n");
        check("FATAL x\r\n\x1b[A\x1b[5X\r\n", "FATAL x\n      x\n");
        check("FATAL\r\n\x1b[A\x1b[1K\r\n", "FATAL\n ATAL\n");
        // Reverse index and save/restore move up too.
        check("\x1b7FATAL\r\n\x1b8\x1b[Kok\r\n", "FATAL\nok\n");
        check("FATAL\r\n\x1bM\x1b[2Kok\r\n", "FATAL\nok\n");
        // Text added after a line's end destroys nothing.
        check("Downloading...\r\n\x1b[A\x1b[14C done\r\n", "Downloading... done\n");
        // The lines above stay in order.
        check(
            "one\r\nFATAL\r\nthree\r\n\x1b[2A\x1b[2Kall good\r\n\x1b[B",
            "one\nFATAL\nall good\nthree\n",
        );
    }

    /// Issue 11: progress displays that redraw themselves keep their last
    /// frame, never one per frame.
    #[test]
    fn progress_displays_keep_their_last_frame() {
        // One line rewritten with `\r` (pip, curl, cargo): the cursor never
        // leaves it.
        check("10%\r20%\r100%\r\ndone\r\n", "100%\ndone\n");
        let pip: String = (0..=50)
            .map(|n| format!("\r   {}{} {n}/50 MB", "━".repeat(n), " ".repeat(50 - n)))
            .collect();
        check(
            format!("Downloading x (50 MB)\r\n{pip}\r\n"),
            format!("Downloading x (50 MB)\n   {} 50/50 MB\n", "━".repeat(50)),
        );
        // Lines redrawn in place, below each other: the same first word.
        check(b"a: 1%\r\nb: 1%\r\n\x1b[2Aa: 100%\r\nb: 100%\r\n", "a: 100%\nb: 100%\n");
        // Spinners and counts in front of the first word do not count.
        check(
            " \u{280b} Container db  Starting\r\n\x1b[1A\x1b[2K \u{2714} Container db  Started\r\n",
            " \u{2714} Container db  Started\n",
        );
        check(
            "45% 3/7 downloading\r\n\x1b[A\x1b[2K100% 7/7 downloading\r\n",
            "100% 7/7 downloading\n",
        );
    }

    /// Scrolling and deleting lines never mixes what was on a row with what
    /// is printed there after: a seen line scrolled or deleted away is
    /// kept whole, and the text printed after is a line of its own.
    #[test]
    fn scrolling_and_deleting_lines_keep_seen_lines_whole() {
        // `echo FATAL-E; printf '\e[1A<op>'; echo ok`, for scroll up and
        // down, delete and insert lines, counts 1, 2 and 999, with and
        // without a scroll region, on a fresh window and on a full one.
        let ops = ["S", "T", "M", "L"];
        for region in ["", "\x1b[1;3r", "\x1b[2;4r"] {
            for op in ops {
                for count in [1, 2, 999] {
                    let seq = format!("{region}\x1b[{count}{op}");
                    for before in ["", "1\r\n2\r\n3\r\n4\r\n5\r\n"] {
                        let input = format!("{before}FATAL-E\r\n\x1b[1A{seq}ok\r\n");
                        for split in [0, 1, 2, 3, 7] {
                            let out = render(input.as_bytes(), split);
                            let lines: Vec<&str> = out.lines().collect();
                            assert!(
                                lines.contains(&"FATAL-E") && lines.contains(&"ok"),
                                "{input:?} split {split}: {out:?}"
                            );
                            assert!(
                                lines
                                    .iter()
                                    .all(|line| ["", "1", "2", "3", "4", "5", "FATAL-E", "ok"]
                                        .contains(line)),
                                "{input:?} split {split}: {out:?}"
                            );
                        }
                    }
                }
            }
        }
        // Reverse index at the top scrolls down; elsewhere it moves up.
        // Scrolling down commits the window first (issue 19): what is
        // printed next comes after it, as it came.
        check(b"FATAL-E\x1bMok\r\n", "FATAL-E\n       ok\n");
        check(b"FATAL-E\r\nx\x1bM\x1bM\rok", "FATAL-E\nx\nok");
        check(b"FATAL-E\r\n\x1bM\x1bMok\r\n", "FATAL-E\nok\n");
        // Issue 19, F13: a scroll region and reverse index at its top
        // (`echo FATAL-13; printf '\e[2;50r\e[2;1H\eM\eM\e[r'; echo ok`)
        // keep the lines in the order they were printed.
        check(b"FATAL-13\r\n\x1b[2;50r\x1b[2;1H\x1bM\x1bM\x1b[rok\r\n", "FATAL-13\nok\n");
        check(b"a\r\nb\r\n\x1b[1;9r\x1b[H\x1bM\x1bM\x1bMc\r\n\x1b[r", "a\nb\nc\n");
        // Exact results for the issue's cases.
        check(b"FATAL-E\r\n\x1b[1A\x1b[999Tok\r\n", "FATAL-E\nok\n");
        check(b"FATAL-E\r\n\x1b[1A\x1b[999Sok\r\n", "FATAL-E\nok\n");
        check(b"FATAL-E\r\n\x1b[1A\x1b[999Mok\r\n", "FATAL-E\nok\n");
        // Scroll up: the top lines go, in order; the cursor keeps its row.
        check(b"a\r\nb\r\nc\x1b[1Sd\r\n", "a\nb\nc\n d\n");
        check(b"a\r\nb\r\nc\r\n\x1b[2A\x1b[1Sd\r\n", "a\nb\nc\nd\n");
        check(b"a\r\nb\r\nc\r\n\x1b[2A\x1b[2Sd\r\n", "a\nb\nc\nd\n");
        // Scroll down and delete lines: the lines below move, whole.
        check(b"a\r\nb\r\n\x1b[2A\x1b[1Tx\r\n", "a\nb\nx\n");
        check(b"a\r\nb\r\nc\r\n\x1b[3A\x1b[1Mx\r\n", "a\nb\nx\nc\n");
        check(b"a\r\nb\r\nc\r\n\x1b[3A\x1b[2Mx\r\n", "a\nb\nc\nx\n");
        check(b"a\r\nb\r\nc\r\n\x1b[2A\x1b[1M\x1b[Bx\r\n", "a\nb\nc\nx\n");
        // A full window: what is pushed off the bottom is kept above the
        // line that took its row.
        check(b"1\r\n2\r\n3\r\n4\r\n5\x1b[4A\x1b[1T\rx", "1\n2\n3\n4\n5\nx");
        check(b"1\r\n2\r\n3\r\n4\r\n5\x1b[2A\x1b[1L\rx", "1\n2\nx\n3\n5\n4");
        // Many times over: bounded, and every line is kept.
        // (Each line says something else: its first word is its number in
        // letters.)
        let word = |n: usize| -> String {
            n.to_string().bytes().map(|digit| char::from(b'a' + digit - b'0')).collect()
        };
        let ops = ["\x1b[T", "\x1b[M", "\x1bM", "\x1b[L", "\x1b[S"];
        let mut input = String::new();
        for n in 0..3_000 {
            input.push_str(&format!("{}\r\n\x1b[1A{}", word(n), ops[n % ops.len()]));
        }
        let out = render(input.as_bytes(), 0);
        let lines: Vec<&str> = out.lines().collect();
        for n in 0..3_000 {
            assert!(lines.contains(&word(n).as_str()), "{n}: {}", &out[..300.min(out.len())]);
        }
    }

    /// A `docker pull`-style display: one line per layer, each redrawn
    /// with cursor up, erase, text and cursor down, many times. The output
    /// is its final state, however many frames there were. (Its lines fit
    /// the width, as `docker` makes them.)
    fn docker_pull(frames: usize) -> String {
        let layers = ["a3ed95caeb02", "4f4fb700ef54", "9c3e1a7d5b21"];
        let mut out: String =
            layers.iter().map(|id| format!("{id}: Pulling fs layer\r\n")).collect();
        for frame in 0..frames {
            for (i, id) in layers.iter().enumerate() {
                let up = layers.len() - i;
                let bar = "=".repeat(frame * 30 / frames);
                out.push_str(&format!(
                    "\x1b[{up}A\x1b[2K\r{id}: Downloading [{bar:<30}] {frame}MB/{frames}MB\r\x1b[{up}B"
                ));
            }
        }
        for (i, id) in layers.iter().enumerate() {
            let up = layers.len() - i;
            out.push_str(&format!("\x1b[{up}A\x1b[2K\r{id}: Pull complete\r\x1b[{up}B"));
        }
        out.push_str("Status: Downloaded newer image\r\n");
        out
    }

    #[test]
    fn multi_line_progress_does_not_grow_with_its_frames() {
        let expected = "a3ed95caeb02: Pull complete\n4f4fb700ef54: Pull complete\n\
                        9c3e1a7d5b21: Pull complete\nStatus: Downloaded newer image\n";
        check(docker_pull(3), expected);
        assert_eq!(render(docker_pull(1000).as_bytes(), 0), expected);
        // A `rich`-style live display: all its lines erased from the bottom
        // up, then drawn again; its last line has no newline until the end.
        let mut rich = String::new();
        for frame in 0..=200 {
            if frame > 0 {
                rich.push_str("\r\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K");
            }
            rich.push_str(&format!(
                "Downloading numpy {frame}/200\r\nDownloading scipy {frame}/200\r\n\u{280b} working {frame}"
            ));
        }
        check(
            format!("{rich}\r\n"),
            "Downloading numpy 200/200\nDownloading scipy 200/200\n\u{280b} working 200\n",
        );
        // A status line whose first word changes is still one progress
        // line: its last state, as on a terminal (issue 18; tmux shows
        // the same).
        let mut status = String::from("\r\n");
        for step in ["Compiling a.cc", "Linking app", "Testing app"] {
            for second in 0..100 {
                status.push_str(&format!("\x1b[1A\x1b[2K  {step}; {second}s\r\n"));
            }
        }
        check(status, "  Testing app; 99s\n");
    }

    /// Whatever a stream erases, what the window keeps stays within its
    /// bound, and nothing is lost.
    #[test]
    fn erased_versions_are_bounded() {
        let mut input = String::new();
        for n in 0..20_000 {
            input.push_str(&format!("{}{n}\r\n\x1b[1A\x1b[2K", ["alpha", "beta"][n % 2]));
        }
        for split in [0, 7] {
            let out = render(input.as_bytes(), split);
            for n in [0, 1, 9_998, 19_999] {
                assert!(out.contains(&format!("{}{n}\n", ["alpha", "beta"][n % 2])), "{n}");
            }
        }
        // Every row of the window erased below, again and again.
        let mut input = String::new();
        for n in 0..2_000 {
            input.push_str(&format!("\x1b[5A\x1b[J{}{n}\r\nb\r\nc\r\nd\r\n", ["x", "y"][n % 2]));
        }
        let out = render(input.as_bytes(), 0);
        assert!(out.contains("x0\n") && out.contains("y1999\n"), "{}", &out[..200]);
    }

    /// Issue 11: lines that scroll off the top of a full-screen view the
    /// program never left are kept, in order; a program that redraws in
    /// place keeps nothing of its frames but the last.
    #[test]
    fn full_screen_views_keep_what_scrolls_off() {
        // `printf '\e[?1049h'; echo FIRST; seq 1 1000`
        let seq: String = (1..=1000).map(|n| format!("{n}\n")).collect();
        check(
            format!("{START}\x1b[?1049hFIRST\n{seq}{END}"),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><alt true>FIRST\n{seq}<End {{ seq: 1, status: 3 }}>"
            ),
        );
        // Text before the switch comes first, on a line of its own.
        check(
            format!("{START}before\x1b[?1049h{seq}{END}"),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><alt true>before\n{seq}<End {{ seq: 1, status: 3 }}>"
            ),
        );
        // Scrolled with `ESC [ S`: what went off the top, blank rows too.
        check(
            format!("{START}\x1b[?1049ha\r\nb\x1b[5S\x1b[Hc{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>a\nb\n\n\n\nc\n<End { seq: 1, status: 3 }>",
        );
        // A program that leaves keeps what scrolled off and its last screen.
        check(
            format!("{START}\x1b[?1049h{seq}\x1b[?1049lafter\r\n{END}"),
            format!(
                "<Start {{ seq: 1, lines_read: None }}><alt true><alt false>{seq}after\n<End {{ seq: 1, status: 3 }}>"
            ),
        );
        // Redrawn in place (top, vim): only the last frame.
        let frames: String = (0..500)
            .map(|n| format!("\x1b[H\x1b[2Jtop - {n}\x1b[2;1HPID USER\x1b[3;1H{n} root"))
            .collect();
        check(
            format!("{START}\x1b[?1049h{frames}{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>top - 499\nPID USER\n499 root\n<End { seq: 1, status: 3 }>",
        );
        // Scrolling inside a scroll region (vim, less with a status line):
        // the region's lines are redrawn, not scrolled off.
        let region: String = (1..=100).map(|n| format!("\x1b[4;1H\n{n}")).collect();
        check(
            format!("{START}\x1b[?1049h\x1b[1;4r{region}\x1b[5;1H:status{END}"),
            "<Start { seq: 1, lines_read: None }><alt true>97\n98\n99\n100\n:status\n<End { seq: 1, status: 3 }>",
        );
    }

    /// What the fuzz target checks, on random streams of the tokens that
    /// matter, for windows of many sizes: the window stays within its
    /// bound, and a line printed after the stream is never hidden.
    #[test]
    fn random_streams_hide_no_later_line_in_any_window() {
        const TOKENS: &[&[u8]] = &[
            b"\x1b",
            b"[",
            b"]",
            b"P",
            b"_",
            b"\\",
            b"(",
            b"\x07",
            b"\x18",
            b"1",
            b";",
            b"m",
            b"A",
            b"K",
            b"J",
            b"S",
            b"r",
            b"\r",
            b"\n",
            b"\n",
            b"x",
            b"FATAL",
            b"\xe4\xb8",
            b"\xad",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b[2A",
            b"\x1b[2K",
            b"\x1b[J",
            b"\x1b[5S",
            b"\x1b[1;3r",
            b"\x1b]6973;n0nce;S;1\x07",
            b"\x1b]6973;n0nce;E;1;0\x07",
            b"\x1b[65535@",
            b"\x1b[65535L",
            b"\x1b7",
            b"\x1b8",
            b"\x1bM",
            b"\x1b[999T",
            b"\x1b[2M",
            b"\x1b[L",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..10_000 {
            let (rows, cols) = (2 + next() % 7, 2 + next() % 40);
            let mut screen = Screen::new(rows as u16, cols as u16, "n0nce");
            let count = 1 + next() % 60;
            let stream: Vec<u8> = (0..count)
                .flat_map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
                .copied()
                .collect();
            let mut rest = stream.as_slice();
            while !rest.is_empty() {
                let piece = 1 + (next() % rest.len() as u64) as usize;
                let (mut piece, tail) = rest.split_at(piece);
                rest = tail;
                while !piece.is_empty() {
                    let (consumed, stop) = screen.feed(piece);
                    piece = &piece[consumed..];
                    match stop {
                        Some(Stop::Marker(Marker::Start { .. })) => screen.discard_window(),
                        Some(Stop::Marker(Marker::End { .. })) => {
                            screen.commit_all();
                            screen.leave_alternate();
                        }
                        _ => {}
                    }
                    assert!(screen.window_cost() <= screen.window_bound());
                }
            }
            screen.take_committed();
            assert_eq!(screen.feed(b"\r\nZ9\r\n"), (6, None));
            let mut seen = screen.take_committed();
            seen.push_str(&screen.alternate_contents().unwrap_or_default());
            screen.commit_all();
            screen.leave_alternate();
            seen.push_str(&screen.take_committed());
            let shown = String::from_utf8_lossy(&stream);
            assert!(seen.contains("Z9"), "{rows}x{cols} {shown:?}: {seen:?}");
        }
    }

    /// A character three columns wide on the narrowest screen (`vt100`
    /// underflowed computing where it fits on two columns).
    #[test]
    fn a_three_column_character_fits_the_narrowest_screen() {
        for cols in [0, 1, 2, 3] {
            let mut screen = Screen::new(2, cols, "n0nce");
            let input = "\x1b[?1049hab\u{17d8}\u{17d8}c\r\n".as_bytes();
            let (consumed, stop) = screen.feed(input);
            assert_eq!(stop, Some(Stop::AlternateScreen(true)));
            assert_eq!(screen.feed(&input[consumed..]), (input.len() - consumed, None));
            assert!(screen.alternate_contents().is_some_and(|text| text.contains('c')));
        }
    }

    /// Whatever the bytes and however they are split, nothing panics and the
    /// window stays within its bound (the fuzz target does the same with
    /// inputs a fuzzer finds).
    #[test]
    fn hostile_streams_stay_within_the_window() {
        let hostile = [
            "\x1b[65535@".repeat(1000),
            format!("x{}", "\x1b[65535b\r".repeat(1000)),
            format!("{}{}", "\x1b[65535L", "\x1b[65535B\x1b[65535C\t".repeat(1000)),
            "\u{301}".repeat(100_000),
            format!("a{}", "\u{301}\x1b[D".repeat(10_000)),
            "😀\u{fe0f}\x1b[1D".repeat(10_000),
            format!("{START}{}", "\x1b[6n".repeat(10_000)),
            "\x1b7\x1b[65535B\x1b8".repeat(1000),
            format!("\x1b[?1049h{}", "\x1b[65535@\x1b[65535L\x1b[65535T".repeat(1000)),
            format!("\x1b[?1049h{}", "\x1b[65535C\x1b[65535Bx\r\n".repeat(1000)),
            // Long lines scrolled and deleted away, each kept whole.
            format!("{}\r\n", "x".repeat(5_000)).repeat(5)
                + &format!("\x1b[5A\x1b[999T{}\x1b[999M\x1bM\x1b[999L", "y".repeat(5_000))
                    .repeat(50),
        ];
        for input in hostile {
            for split in [0, 1, 5] {
                render(input.as_bytes(), split);
            }
        }
    }
}
