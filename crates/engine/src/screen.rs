//! Rendering the bytes a PTY produces into the text a person would read.
//!
//! The renderer keeps a small window of recent lines that programs can
//! still change (`\r` progress bars, erase-line, cursor up for multi-line
//! progress displays); a line that leaves the window is final and becomes
//! committed text, exactly as a line that scrolls off a real terminal's
//! screen can no longer change. Colours and other attributes are dropped.
//! Wide characters (CJK, most emoji) take two columns; combining marks,
//! joiners and variation selectors stay with the character before them. Full-screen programs (the alternate screen: vim, less, top) are
//! drawn by a real emulator, `vt100`, and shown as their current screen.
//!
//! It also recognises the shell markers (an OSC sequence carrying the
//! session's nonce) and stops right after each one, so the caller knows
//! exactly which text came before it, and it answers the cursor-position
//! and device-attribute queries a terminal answers, queuing the bytes for
//! the caller to write back. It does not know what a command or a session
//! is, and it never reads or writes anything itself.
//!
//! # Bounds
//!
//! Whatever the bytes, the memory held is bounded by the window, never by
//! the input ([`Screen::window_cost`] measures it):
//! - the window holds at most `rows` lines; cursor movement, absolute
//!   positioning, insertion, repetition and tabs never take the cursor past
//!   the last row or past the last column (only printed text makes a
//!   logical line longer than the width, as agents need long lines whole);
//! - a line keeps at most [`LINE_LIMIT`] cells (plus what one operation
//!   adds): past that, its beginning up to the cursor's row on screen is
//!   committed, and `\r` then rewrites only what is left, so a line with no
//!   newline costs about its own size in committed text and no more;
//! - an OSC string is cut after [`OSC_LIMIT`] bytes (the parser's buffer
//!   would otherwise grow with it), and queued answers after
//!   [`RESPONSE_LIMIT`] bytes;
//! - the full-screen emulator is one screen plus one screen of scrollback,
//!   and the counts it would loop over once per unit (insert characters,
//!   insert lines, scroll down) are clamped to the window before it sees
//!   them, so no sequence costs more than a window's worth of work.
//!
//! Committed text is the caller's to take: between two takes it grows by at
//! most the window's text plus, per escape sequence fed, one width of
//! characters (a cursor move pads a line with spaces up to the width).

use std::collections::VecDeque;
use std::ops::Range;

use unicode_width::UnicodeWidthChar;
use vte::{Params, Perform};

/// The OSC number our shell markers use. Real terminals ignore unknown OSC
/// numbers, so the markers are invisible to a person watching.
pub const MARKER_OSC: &str = "6973";

/// Cells a line of the window keeps before its beginning is committed.
pub const LINE_LIMIT: usize = 4096;

/// Bytes of one OSC string passed to the parsers; the rest of a longer one
/// is dropped (a marker is under 100 bytes, a hyperlink a few hundred).
pub const OSC_LIMIT: usize = 4096;

/// Bytes of answers to terminal queries kept until the caller takes them.
pub const RESPONSE_LIMIT: usize = 1024;

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
    },
    /// The shell is back at its prompt after the command with this sequence
    /// number, which exited with `status`.
    End {
        /// The command's sequence number.
        seq: u64,
        /// The exit status bash reported (`$?`).
        status: i32,
    },
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
    osc: OscGuard,
    state: Renderer,
}

impl Screen {
    /// A renderer for a terminal of `rows` by `cols` that accepts markers
    /// carrying `nonce`.
    pub fn new(rows: u16, cols: u16, nonce: &str) -> Screen {
        Screen {
            parser: vte::Parser::new(),
            osc: OscGuard::default(),
            state: Renderer {
                rows: usize::from(rows.max(2)),
                cols: usize::from(cols.max(2)),
                nonce: nonce.as_bytes().to_vec(),
                lines: VecDeque::from([Line::default()]),
                row: 0,
                col: 0,
                saved_cursor: (0, 0),
                last_printed: None,
                committed: String::new(),
                alternate: None,
                pause: None,
                in_command: false,
                responses: Vec::new(),
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
            let (pass, guard_after) = self.osc.scan(rest);
            if pass == 0 {
                // The middle of an overlong OSC string: nobody sees it.
                done += self.osc.droppable(rest);
                continue;
            }
            let consumed = self.parser.advance_until_terminated(&mut self.state, &rest[..pass]);
            if consumed == pass {
                self.osc = guard_after;
            } else {
                self.osc.advance(&rest[..consumed]);
            }
            let pause = self.state.pause.take();
            if let Some(alternate) = &mut self.state.alternate {
                // The alternate screen sees every byte it was active for,
                // including the sequence that ends it.
                match &pause {
                    Some(Pause::Oversized(replacement)) => {
                        // The consumed bytes end with the oversized
                        // sequence's final byte: finish it as one the
                        // emulator ignores, then send it clamped.
                        process_onlcr(alternate, &rest[..consumed - 1]);
                        alternate.process(b"q");
                        alternate.process(replacement.as_bytes());
                    }
                    _ => process_onlcr(alternate, &rest[..consumed]),
                }
            }
            done += consumed;
            match pause {
                None | Some(Pause::Oversized(_)) => {}
                Some(Pause::CursorQuery) => self.state.answer_cursor_position(),
                Some(Pause::Stop(stop)) => {
                    if let Stop::AlternateScreen(on) = stop {
                        let (rows, cols) = (self.state.rows as u16, self.state.cols as u16);
                        // One screen of scrollback keeps what scrolled off
                        // the top, in case the program never leaves.
                        self.state.alternate =
                            on.then(|| vt100::Parser::new(rows, cols, usize::from(rows)));
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

    /// Commits every line in the window, the unfinished last one included,
    /// and starts afresh: used when a command ends.
    pub fn commit_all(&mut self) {
        self.state.commit_lines(self.state.lines.len(), true);
    }

    /// Commits the finished lines of the window, leaving the line the cursor
    /// is on (which a progress bar may still rewrite): used when a reply goes
    /// out while a command is still running.
    pub fn commit_complete_lines(&mut self) {
        let n = self.state.row;
        self.state.commit_lines(n, false);
    }

    /// Drops the window without committing it: used for the echo of the
    /// line we type to start a command.
    pub fn discard_window(&mut self) {
        self.state.lines.truncate(1);
        self.state.lines[0].clear();
        self.state.row = 0;
        self.state.col = 0;
        self.state.saved_cursor = (0, 0);
    }

    /// The line the cursor is on, as it looks now (not committed), up to
    /// the cursor at least, so a prompt keeps its trailing space. At most
    /// [`LINE_LIMIT`] cells plus one screen width: the beginning of a
    /// longer line is already committed.
    pub fn current_line(&self) -> String {
        let Some(line) = self.state.lines.get(self.state.row) else { return String::new() };
        let end = line.trimmed_len().max(self.state.col.min(line.len()));
        let mut text = String::new();
        line.write(0..end, &mut text);
        text
    }

    /// The last line in the window with text on it, at or above the cursor,
    /// as it looks now; empty when there is none. For progress messages.
    pub fn newest_line(&self) -> String {
        let rows = self.state.lines.iter().take(self.state.row + 1).rev();
        rows.map(|line| {
            let mut text = String::new();
            line.write(0..line.len(), &mut text);
            text
        })
        .find(|text| !text.trim().is_empty())
        .map(|text| text.trim_end().to_owned())
        .unwrap_or_default()
    }

    /// The alternate screen's contents when a full-screen program is
    /// showing it: its rows without trailing spaces, without the blank rows
    /// at the bottom.
    pub fn alternate_contents(&self) -> Option<String> {
        self.state.alternate.as_ref().map(|parser| screen_text(parser.screen()))
    }

    /// Leaves the alternate screen without its closing sequence, e.g. when
    /// the program that drew it ended or was killed: what it showed (and
    /// what scrolled off its top, up to one more screen) is committed after
    /// the window, as lines of their own, so output printed there is kept.
    pub fn leave_alternate(&mut self) {
        let Some(mut parser) = self.state.alternate.take() else { return };
        let screen = parser.screen_mut();
        screen.set_scrollback(usize::MAX);
        let scrolled_off = screen.scrollback();
        let mut rows: Vec<String> = screen.rows(0, u16::MAX).take(scrolled_off).collect();
        screen.set_scrollback(0);
        rows.extend(screen.rows(0, u16::MAX));
        let text = join_rows(rows);
        if text.is_empty() {
            return;
        }
        let state = &mut self.state;
        state.commit_lines(state.lines.len(), true);
        // The window's last line is committed without a newline.
        if !state.committed.is_empty() && !state.committed.ends_with('\n') {
            state.committed.push('\n');
        }
        state.committed.push_str(&text);
        state.committed.push('\n');
    }

    /// The memory the renderer holds now, in bytes, apart from committed
    /// text: the window's lines, queued answers and the full-screen
    /// emulator. Never more than [`Screen::window_bound`].
    pub fn window_cost(&self) -> usize {
        let lines: usize = self.state.lines.iter().map(Line::cost).sum();
        lines + self.state.responses.capacity() + self.alternate_cost()
    }

    /// The most [`Screen::window_cost`] can be for this window size,
    /// whatever was fed.
    pub fn window_bound(&self) -> usize {
        let (rows, cols) = (self.state.rows, self.state.cols);
        // A line's cells may have twice the capacity they use (a vector
        // grows by doubling); one operation adds at most a width of cells.
        let cells = 2 * (LINE_LIMIT + cols + 8) * std::mem::size_of::<Cell>();
        let clusters = 2 * LINE_CLUSTERS * (std::mem::size_of::<String>() + CLUSTER_BYTES);
        rows * (cells + clusters + std::mem::size_of::<Line>())
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

/// Feeds `bytes` to `parser` with each line feed preceded by a carriage
/// return: the PTY runs without output post-processing (see `pty.rs`), and
/// programs that print plain lines on the alternate screen (top, a
/// traceback) count on the kernel's `ONLCR` doing this, as the window's
/// renderer does when it treats a line feed as a new line.
fn process_onlcr(parser: &mut vt100::Parser, bytes: &[u8]) {
    let mut lines = bytes.split(|&b| b == b'\n');
    if let Some(first) = lines.next() {
        parser.process(first);
    }
    for line in lines {
        parser.process(b"\r\n");
        parser.process(line);
    }
}

/// What the `vt100` emulator holds: one screen and the alternate one, each
/// of 32-byte cells, and one screen of scrollback.
fn alternate_cost(rows: usize, cols: usize) -> usize {
    3 * rows * cols * 32
}

/// A `vt100` screen's rows as text: trailing spaces and blank bottom rows
/// removed.
fn screen_text(screen: &vt100::Screen) -> String {
    join_rows(screen.rows(0, u16::MAX).collect())
}

fn join_rows(rows: Vec<String>) -> String {
    let mut text = String::new();
    for row in rows {
        text.push_str(row.trim_end_matches(' '));
        text.push('\n');
    }
    let end = text.trim_end_matches('\n').len();
    text.truncate(end);
    text
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
}

impl Line {
    fn len(&self) -> usize {
        self.cells.len()
    }

    fn clear(&mut self) {
        self.cells.clear();
        self.clusters.clear();
        self.clusters_full = false;
    }

    /// Bytes held by this line.
    fn cost(&self) -> usize {
        std::mem::size_of::<Line>()
            + self.cells.capacity() * std::mem::size_of::<Cell>()
            + self.clusters.capacity() * std::mem::size_of::<String>()
            + self.clusters.iter().map(String::capacity).sum::<usize>()
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
}

struct Renderer {
    rows: usize,
    cols: usize,
    nonce: Vec<u8>,
    /// The window of lines that can still change; the last is the newest.
    /// Never more than `rows` lines.
    lines: VecDeque<Line>,
    /// Cursor row (index into `lines`) and column.
    row: usize,
    col: usize,
    saved_cursor: (usize, usize),
    /// The last character printed and whether it is wide, for REP.
    last_printed: Option<(char, bool)>,
    committed: String,
    /// The emulator for a full-screen program, while one is showing.
    alternate: Option<vt100::Parser>,
    /// Set when parsing must pause.
    pause: Option<Pause>,
    /// Between a start marker and an end marker: queries are answered.
    in_command: bool,
    /// Answers to queries, for the caller to write to the terminal.
    responses: Vec<u8>,
}

impl Renderer {
    fn in_alternate(&self) -> bool {
        self.alternate.is_some()
    }

    fn line(&mut self) -> &mut Line {
        &mut self.lines[self.row]
    }

    /// The rightmost column cursor movement may reach: the last column of
    /// the window, or the end of the text already on a longer line.
    fn max_col(&self) -> usize {
        (self.cols - 1).max(self.lines[self.row].len())
    }

    fn line_feed(&mut self) {
        self.row += 1;
        self.col = 0;
        if self.row < self.lines.len() {
            return;
        }
        if self.lines.len() < self.rows {
            self.lines.push_back(Line::default());
            return;
        }
        // The top line scrolls out of reach: it is final now. Its buffer is
        // reused for the new line, so a long output allocates nothing per
        // line.
        let mut top = self.lines.pop_front().expect("the window is never empty");
        top.write(0..top.trimmed_len(), &mut self.committed);
        self.committed.push('\n');
        top.clear();
        self.lines.push_back(top);
        self.row -= 1;
        self.saved_cursor.0 = self.saved_cursor.0.saturating_sub(1);
    }

    /// Moves the first `n` lines of the window to the committed text; with
    /// `all`, the window is emptied and the last line needs no newline.
    fn commit_lines(&mut self, n: usize, all: bool) {
        for i in 0..n.min(self.lines.len()) {
            let last = all && i + 1 == self.lines.len();
            let line = &self.lines[i];
            if last && line.len() == 0 {
                break;
            }
            line.write(0..line.trimmed_len(), &mut self.committed);
            if !last {
                self.committed.push('\n');
            }
        }
        if all {
            self.lines.truncate(1);
            self.lines[0].clear();
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

    /// Keeps the cursor's line within [`LINE_LIMIT`] cells: the lines above
    /// it and its beginning, up to the start of the row the cursor is on
    /// in a real terminal, become final.
    #[cold]
    fn bound_line(&mut self) {
        if self.lines[self.row].len() <= LINE_LIMIT {
            return;
        }
        self.commit_lines(self.row, false);
        let line = &mut self.lines[0];
        let mut cut = (self.col - self.col % self.cols)
            .max(line.len().saturating_sub(LINE_LIMIT))
            .min(line.len());
        if line.cells.get(cut) == Some(&Cell::WIDE_FILL) {
            cut += 1;
        }
        line.write(0..cut, &mut self.committed);
        line.cells.drain(..cut);
        self.col = self.col.saturating_sub(cut);
        if self.saved_cursor.0 == 0 {
            self.saved_cursor.1 = self.saved_cursor.1.saturating_sub(cut);
        }
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
        let col = self.col;
        let line = &mut self.lines[self.row];
        if col == line.cells.len() {
            line.cells.push(Cell::char(c));
        } else {
            line.put(col, Cell::char(c), false);
        }
        let long = line.cells.len() > LINE_LIMIT;
        self.col += 1;
        self.last_printed = Some((c, false));
        if long {
            self.bound_line();
        }
    }

    fn print_unicode(&mut self, c: char) {
        let col = self.col;
        let width = c.width().unwrap_or(1);
        if width == 0 && self.line().attach(col, c) {
            return;
        }
        let wide = width == 2;
        self.line().put(col, Cell::char(c), wide);
        self.col += if wide { 2 } else { 1 };
        self.last_printed = Some((c, wide));
        self.bound_line();
    }

    fn tab(&mut self) {
        let next = (self.col / 8 + 1) * 8;
        let (col, cols) = (self.col, self.cols);
        let line = self.line();
        if col >= line.len() {
            // Appending: keep the tab itself (agents parse tab-separated
            // output), padded to its stop with placeholders that render as
            // nothing; past the width it is one cell, like printed text.
            line.put(col, Cell::char('\t'), false);
            if next <= cols {
                line.cells.resize(next, Cell::TAB_FILL);
                self.col = next;
            } else {
                self.col += 1;
            }
            self.bound_line();
        } else {
            self.col = next.min(self.max_col());
        }
    }

    fn move_to_row(&mut self, row: usize) {
        let row = row.min(self.rows - 1);
        while self.lines.len() <= row {
            self.lines.push_back(Line::default());
        }
        self.row = row;
    }

    fn erase_in_line(&mut self, mode: u16) {
        let col = self.col;
        let line = self.line();
        match mode {
            0 => {
                line.split_at(col);
                line.cells.truncate(col);
            }
            1 => {
                let end = (col + 1).min(line.len());
                line.split_at(end);
                line.cells[..end].fill(Cell::BLANK);
            }
            _ => line.clear(),
        }
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
            Some(parser) => {
                let (row, col) = parser.screen().cursor_position();
                (usize::from(row), usize::from(col))
            }
            None => (self.row, self.col.min(self.cols - 1)),
        };
        let answer = format!("\x1b[{};{}R", row + 1, col + 1);
        self.respond(answer.as_bytes());
    }

    fn marker(&self, params: &[&[u8]]) -> Option<Marker> {
        // ESC ] 6973 ; nonce ; S ; seq BEL  or  ESC ] 6973 ; nonce ; E ; seq ; status BEL
        let [osc, nonce, kind, rest @ ..] = params else { return None };
        if *osc != MARKER_OSC.as_bytes() || *nonce != self.nonce.as_slice() {
            return None;
        }
        let number = |bytes: &[u8]| std::str::from_utf8(bytes).ok()?.parse().ok();
        match (*kind, rest) {
            (b"S", [seq]) => Some(Marker::Start { seq: number(seq)? }),
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
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => self.tab(),
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        if let Some(marker) = self.marker(params) {
            self.in_command = matches!(marker, Marker::Start { .. });
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
            let alternate = params.iter().any(|p| matches!(p.first(), Some(47 | 1047 | 1049)));
            let on = action == 'h';
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
                0 => {
                    self.erase_in_line(0);
                    self.lines.truncate(self.row + 1);
                }
                // Erase the whole screen: a person would see a blank
                // screen, but an agent loses nothing by keeping the text.
                _ => {
                    let n = self.lines.len();
                    self.commit_lines(n, true);
                }
            },
            'A' => self.row = self.row.saturating_sub(count),
            // Down stops at the last row, as on a real screen: it never
            // scrolls.
            'B' | 'e' => self.move_to_row(self.row + count),
            'C' | 'a' => self.col = (self.col + count).min(self.max_col()).max(self.col),
            'D' => self.col = self.col.saturating_sub(count),
            'E' => {
                self.move_to_row(self.row + count);
                self.col = 0;
            }
            'F' => {
                self.row = self.row.saturating_sub(count);
                self.col = 0;
            }
            'G' | '`' => self.col = (count - 1).min(self.cols - 1),
            'H' | 'f' => {
                // Absolute rows have no meaning in a scrolling log; keep
                // the row and honour the column.
                let col = params.iter().nth(1).and_then(|p| p.first().copied()).unwrap_or(1);
                self.col = (usize::from(col.max(1)) - 1).min(self.cols - 1);
            }
            // Forward and backward tab stops.
            'I' => self.col = ((self.col / 8 + count) * 8).min(self.max_col()).max(self.col),
            'Z' => self.col = (self.col.div_ceil(8).saturating_sub(count)) * 8,
            'X' => {
                let col = self.col;
                let line = self.line();
                let end = (col + count).min(line.len());
                if col < end {
                    line.split_at(col);
                    line.split_at(end);
                    line.cells[col..end].fill(Cell::BLANK);
                }
            }
            'P' => {
                let col = self.col;
                let line = self.line();
                let end = (col + count).min(line.len());
                if col < end {
                    line.split_at(col);
                    line.split_at(end);
                    line.cells.drain(col..end);
                }
            }
            '@' => {
                // Insert blanks: what is pushed past the last column of a
                // line that fits the width is gone, as on a real screen.
                let (col, cols) = (self.col, self.cols);
                let line = self.line();
                let n = count.min(cols.saturating_sub(col));
                if col < line.len() && n > 0 {
                    let keep = line.len().max(cols);
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
                for _ in 0..n {
                    self.lines.insert(self.row, Line::default());
                }
            }
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
        if self.in_alternate() || !intermediates.is_empty() {
            return;
        }
        match byte {
            b'7' => self.saved_cursor = (self.row, self.col),
            b'8' => {
                let (row, col) = self.saved_cursor;
                self.move_to_row(row.min(self.lines.len() - 1));
                self.col = col.min(self.max_col());
            }
            b'M' => self.row = self.row.saturating_sub(1),
            b'D' | b'E' => self.line_feed(),
            _ => {}
        }
    }

    fn terminated(&self) -> bool {
        self.pause.is_some()
    }
}

/// Follows the parser's state just enough to know when it is inside an OSC
/// string and how long that string is, so that bytes past [`OSC_LIMIT`]
/// can be kept from it: `vte` (with `std`) buffers a whole OSC string,
/// however long.
///
/// It mirrors `vte` 0.15's transitions exactly where they matter: ESC
/// enters the escape state from every state; in it, `]` starts an OSC
/// string, C0 controls (but CAN and SUB), DEL and bytes from 0x80 leave it
/// unchanged, and every other byte leaves it; an OSC string ends at BEL,
/// CAN, SUB or ESC. A unit test checks the mirror against `vte` itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum OscGuard {
    /// Anywhere else (ground, CSI, DCS, …): only ESC matters.
    #[default]
    Other,
    /// After ESC.
    Escape,
    /// Inside an OSC string, with its length so far.
    Osc(usize),
}

impl OscGuard {
    /// The state after `byte`, and whether `byte` ended an OSC string.
    fn step(self, byte: u8) -> (OscGuard, bool) {
        match (self, byte) {
            (OscGuard::Osc(_), 0x1b) => (OscGuard::Escape, true),
            (_, 0x1b) => (OscGuard::Escape, false),
            (OscGuard::Other, _) => (OscGuard::Other, false),
            (OscGuard::Escape, b']') => (OscGuard::Osc(0), false),
            (OscGuard::Escape, 0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x7f..=0xff) => {
                (OscGuard::Escape, false)
            }
            (OscGuard::Escape, _) => (OscGuard::Other, false),
            (OscGuard::Osc(_), 0x07 | 0x18 | 0x1a) => (OscGuard::Other, true),
            (OscGuard::Osc(n), _) => (OscGuard::Osc(n + 1), false),
        }
    }

    /// Whether `byte` must be kept from the parsers in this state.
    fn drops(self, byte: u8) -> bool {
        matches!(self, OscGuard::Osc(n) if n >= OSC_LIMIT)
            && !matches!(byte, 0x07 | 0x18 | 0x1a | 0x1b)
    }

    /// How many leading bytes of `bytes` may pass, and the state after
    /// them; `self` is unchanged.
    fn scan(self, bytes: &[u8]) -> (usize, OscGuard) {
        let mut state = self;
        let mut i = 0;
        while i < bytes.len() {
            if state == OscGuard::Other {
                match memchr::memchr(0x1b, &bytes[i..]) {
                    Some(at) => i += at,
                    None => return (bytes.len(), state),
                }
            }
            if state.drops(bytes[i]) {
                break;
            }
            state = state.step(bytes[i]).0;
            i += 1;
        }
        (i, state)
    }

    /// Moves over `bytes`, which the parsers consumed.
    fn advance(&mut self, bytes: &[u8]) {
        let (n, state) = self.scan(bytes);
        debug_assert_eq!(n, bytes.len(), "only bytes that passed are consumed");
        *self = state;
    }

    /// How many leading bytes of `bytes` are dropped in this state.
    fn droppable(self, bytes: &[u8]) -> usize {
        bytes.iter().position(|&b| !self.drops(b)).unwrap_or(bytes.len())
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
        let mut screen = Screen::new(5, 80, "n0nce");
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
        let (input, expected) = (input.as_ref(), expected.as_ref());
        for split in [0, 1, 2, 3, 7] {
            assert_eq!(render(input, split), expected, "split every {split} bytes");
        }
    }

    #[test]
    fn plain_lines() {
        check(b"hello\r\nworld\r\n", "hello\nworld\n");
        check(b"no newline", "no newline");
        check("caf\u{e9} \u{1F600}\r\n".as_bytes(), "caf\u{e9} \u{1F600}\n");
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
        // up stops at line 4, and lines 1 to 3 can no longer change.
        let input = b"1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7\r\n\x1b[9Ax\r\n";
        check(input, "1\n2\n3\nx\n5\n6\n7\n");
    }

    #[test]
    fn markers_need_the_nonce_and_split_the_stream() {
        check(
            b"echo\x1b]6973;n0nce;S;4\x07out\r\n\x1b]6973;n0nce;E;4;0\x07",
            "echo<Start { seq: 4 }>out\n<End { seq: 4, status: 0 }>",
        );
        // Wrong nonce, malformed fields, or OpenHands-style text: ignored.
        check(
            b"\x1b]6973;guess;E;4;0\x07\x1b]6973;n0nce;E;x;0\x07###PS1JSON###\r\n",
            "###PS1JSON###\n",
        );
        check(b"a\x1b]6973;n0nce;E;9;130\x1b\\b", "a<End { seq: 9, status: 130 }>b");
    }

    #[test]
    fn full_screen_programs_show_their_screen_and_leave_no_trace() {
        check(
            b"before\r\n\x1b[?1049h\x1b[2J\x1b[Htop line\x1b[3;1Hthird\x1b[?1049lafter\r\n",
            "<alt true><alt false>before\nafter\n",
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
            "<alt true><alt false><alt true><screen \"\\nsecond\">",
        );
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
            "<Start { seq: 1 }><alt true>IMPORTANT\n<End { seq: 1, status: 3 }>",
        );
        // Text before the switch comes first, on a line of its own.
        check(
            format!("{START}working\x1b[?1049hTraceback\r\n  boom\r\n{END}"),
            "<Start { seq: 1 }><alt true>working\nTraceback\n  boom\n<End { seq: 1, status: 3 }>",
        );
        // A traceback longer than the screen: what scrolled off is kept.
        let lines: String = (1..=8).map(|n| format!("line {n}\r\n")).collect();
        check(
            format!("{START}\x1b[?1049h{lines}{END}"),
            format!(
                "<Start {{ seq: 1 }}><alt true>{}<End {{ seq: 1, status: 3 }}>",
                (1..=8).map(|n| format!("line {n}\n")).collect::<String>()
            ),
        );
        // With the closing sequence it leaves no trace.
        check(
            format!("{START}\x1b[?1049hdrawn\x1b[?1049l{END}"),
            "<Start { seq: 1 }><alt true><alt false><End { seq: 1, status: 3 }>",
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
        check(b"\x1b[65535;65535fx", last_col("x"));
        check(b"\x1b[65535Ix", last_col("x"));
        check(b"\x1b[65535dx", "x");
        // Down stops at the last of the window's 5 rows, and never scrolls.
        check(format!("{}x", "\x1b[65535B".repeat(4000)), "\n\n\n\nx");
        check(b"\x1b[2ex\x1b[65535Ey", "\n\nx\n\ny");
        // Insertion: what is pushed past the width is gone.
        check(b"abc\r\x1b[65535@x", "x");
        check(b"a\r\n\x1b[65535Lb", "a\nb");
        check(b"a\r\nc\r\x1b[65535Lb", "a\nb\n\n\nc");
        // Repetition: at most a width's worth.
        check(b"x\x1b[65535b", "x".repeat(81));
        // Tabs stop at the width; past it each is one cell, kept as text.
        check(format!("{}x", "\t".repeat(100)), format!("{}x", "\t".repeat(100)));
        check(b"abc\r\x1b[65535C\x1b[65535Zx", "xbc");
    }

    /// Issue 7: a line with no newline costs about its own size; `\r` then
    /// rewrites only what is not yet committed.
    #[test]
    fn long_lines_commit_their_beginning() {
        let a = |n: usize| "a".repeat(n);
        check(a(10_000), a(10_000));
        // 4097 cells: the beginning up to the cursor's screen row (50 rows
        // of 80) is committed; twice in 10,000 characters.
        check(format!("{}\rb", a(10_000)), format!("{}b{}", a(8160), a(1839)));
        check(format!("{}\r\n", a(LINE_LIMIT)), format!("{}\n", a(LINE_LIMIT)));
        // A wide character is never cut in half.
        let wide = "中".repeat(5_000);
        check(format!("{wide}\r\n"), format!("{wide}\n"));

        let mut screen = Screen::new(50, 200, "n0nce");
        let line = vec![b'x'; 1 << 20];
        for _ in 0..4 {
            assert_eq!(screen.feed(&line), (line.len(), None));
            assert!(screen.take_committed().len() >= line.len() - LINE_LIMIT);
            assert!(screen.window_cost() <= screen.window_bound());
            assert!(screen.current_line().len() <= LINE_LIMIT);
        }
    }

    /// The README states the bound for the session's 50x200 window.
    #[test]
    fn the_default_window_is_bounded_under_five_megabytes() {
        let screen = Screen::new(50, 200, "n0nce");
        assert!(screen.window_bound() < 5_000_000, "{}", screen.window_bound());
        assert!(screen.window_cost() < 10_000, "{}", screen.window_cost());
    }

    /// Issue 6: `ESC [ 6 n`, `ESC [ c` and `ESC [ > c` are answered while a
    /// command runs, and never at the prompt.
    #[test]
    fn queries_are_answered_while_a_command_runs() {
        let answers = |text: &str| format!("<answers {text:?}>");
        check(
            format!("{START}abc\x1b[6n"),
            format!("<Start {{ seq: 1 }}>abc{}", answers("\x1b[1;4R")),
        );
        check(
            format!("{START}x\r\ny\x1b[5n"),
            format!("<Start {{ seq: 1 }}>x\ny{}", answers("\x1b[0n")),
        );
        check(
            format!("{START}a\r\n\x1b[65535C\x1b[6n"),
            format!("<Start {{ seq: 1 }}>a\n{}", answers("\x1b[2;80R")),
        );
        check(
            format!("{START}\x1b[c\x1b[>c"),
            format!("<Start {{ seq: 1 }}>{}", answers("\x1b[?1;2c\x1b[>0;10;0c")),
        );
        // On the alternate screen, the full-screen emulator's cursor.
        check(
            format!("{START}\x1b[?1049h\x1b[3;5Hab\x1b[6n"),
            format!(
                "<Start {{ seq: 1 }}><alt true><screen \"\\n\\n    ab\">{}",
                answers("\x1b[3;7R")
            ),
        );
        // At the prompt, or once the command has ended: no answer.
        check(b"\x1b[6n\x1b[c", "");
        check(format!("{START}\x1b[6n{END}"), "<Start { seq: 1 }><End { seq: 1, status: 3 }>");
        // A flood of queries is answered up to the limit.
        let flood = render(format!("{START}{}", "\x1b[c".repeat(10_000)).as_bytes(), 0);
        assert!(flood.len() < 2 * RESPONSE_LIMIT, "{}", flood.len());
    }

    /// Issue 7: an OSC string of any length costs at most [`OSC_LIMIT`]
    /// bytes, and what follows it renders as usual.
    #[test]
    fn long_osc_strings_are_cut() {
        let osc = format!("\x1b]0;{}\x07after\r\n", "t".repeat(100_000));
        check(&osc, "after\n");
        check(format!("{osc}{START}"), "after\n<Start { seq: 1 }>");
        check(format!("\x1b]8;;{}\x1b\\link\r\n", "u".repeat(50_000)), "link\n");
        // The guard lets no more than the limit through.
        let (passed, _) = OscGuard::default().scan(osc.as_bytes());
        // ESC and `]`, then the limit (which counts `0;`).
        assert_eq!(passed, 2 + OSC_LIMIT);
        let mut screen = Screen::new(5, 80, "n0nce");
        let huge = [b"\x1b]0;".as_slice(), &vec![b'x'; 10 << 20]].concat();
        assert_eq!(screen.feed(&huge), (huge.len(), None));
    }

    /// The OSC guard agrees with `vte` on where every OSC string ends, on
    /// streams made of the bytes that matter to either.
    #[test]
    fn the_osc_guard_mirrors_the_parser() {
        struct Ends(Vec<usize>, usize);
        impl Perform for Ends {
            fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
                self.0.push(self.1);
            }
        }
        const ALPHABET: &[u8] =
            b"\x1b\x1b\x1b]]]\x07\x18\x1a\x9c\x80\xe4\xbd\xa0[P^X_\\;a0 \x7f\x00\x0a\x19\x1c/";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ALPHABET[(seed % ALPHABET.len() as u64) as usize]
                })
                .collect();
            let mut parser = vte::Parser::new();
            let mut parsed = Ends(Vec::new(), 0);
            let mut guard = OscGuard::default();
            let mut guarded = Vec::new();
            for (i, &byte) in bytes.iter().enumerate() {
                parsed.1 = i;
                parser.advance(&mut parsed, &[byte]);
                let (next, ended) = guard.step(byte);
                if ended {
                    guarded.push(i);
                }
                guard = next;
            }
            assert_eq!(guarded, parsed.0, "on {bytes:?}");
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
        ];
        for input in hostile {
            for split in [0, 1, 5] {
                render(input.as_bytes(), split);
            }
        }
    }
}
