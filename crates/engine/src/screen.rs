//! Rendering the bytes a PTY produces into the text a person would read.
//!
//! The renderer keeps a small window of recent lines that programs can
//! still change (`\r` progress bars, erase-line, cursor up for multi-line
//! progress displays); a line that leaves the window is final and becomes
//! committed text, exactly as a line that scrolls off a real terminal's
//! screen can no longer change. Colours and other attributes are dropped.
//! Full-screen programs (the alternate screen: vim, less, top) are drawn
//! by a real emulator, `vt100`, and shown as their current screen.
//!
//! It also recognises the shell markers (an OSC sequence carrying the
//! session's nonce) and stops right after each one, so the caller knows
//! exactly which text came before it. It does not know what a command or a
//! session is.

use std::collections::VecDeque;

use vte::{Params, Perform};

/// The OSC number our shell markers use. Real terminals ignore unknown OSC
/// numbers, so the markers are invisible to a person watching.
pub const MARKER_OSC: &str = "6973";

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
    state: Renderer,
}

impl Screen {
    /// A renderer for a terminal of `rows` by `cols` that accepts markers
    /// carrying `nonce`.
    pub fn new(rows: u16, cols: u16, nonce: &str) -> Screen {
        Screen {
            parser: vte::Parser::new(),
            state: Renderer {
                rows: usize::from(rows.max(2)),
                cols: cols.max(2),
                nonce: nonce.as_bytes().to_vec(),
                lines: VecDeque::from([Vec::new()]),
                row: 0,
                col: 0,
                saved_cursor: (0, 0),
                committed: String::new(),
                alternate: None,
                stop: None,
            },
        }
    }

    /// Processes `bytes` until the end or until a marker or a screen switch
    /// has been read; returns how many bytes were consumed and why it
    /// stopped early. Call again with the rest.
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Stop>) {
        let consumed = self.parser.advance_until_terminated(&mut self.state, bytes);
        if let Some(alternate) = &mut self.state.alternate {
            // The alternate screen sees every byte it was active for,
            // including the sequence that ends it.
            alternate.process(&bytes[..consumed]);
        }
        let stop = self.state.stop.take();
        if let Some(Stop::AlternateScreen(on)) = stop {
            let (rows, cols) = (self.state.rows as u16, self.state.cols);
            self.state.alternate = on.then(|| vt100::Parser::new(rows, cols, 0));
        }
        (consumed, stop)
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
        self.state.lines = VecDeque::from([Vec::new()]);
        self.state.row = 0;
        self.state.col = 0;
    }

    /// The line the cursor is on, as it looks now (not committed), up to
    /// the cursor at least, so a prompt keeps its trailing space.
    pub fn current_line(&self) -> String {
        let Some(line) = self.state.lines.get(self.state.row) else { return String::new() };
        let end = line.iter().rposition(|&c| c != ' ').map_or(0, |i| i + 1);
        let end = end.max(self.state.col.min(line.len()));
        line[..end].iter().filter(|&&c| c != TAB_FILL).collect()
    }

    /// The last line in the window with text on it, at or above the cursor,
    /// as it looks now; empty when there is none. For progress messages.
    pub fn newest_line(&self) -> String {
        let rows = self.state.lines.iter().take(self.state.row + 1).rev();
        rows.map(|line| line.iter().filter(|&&c| c != TAB_FILL).collect::<String>())
            .find(|text| !text.trim().is_empty())
            .map(|text| text.trim_end().to_owned())
            .unwrap_or_default()
    }

    /// The alternate screen's contents when a full-screen program is
    /// showing it.
    pub fn alternate_contents(&self) -> Option<String> {
        self.state.alternate.as_ref().map(|parser| {
            let contents = parser.screen().contents();
            contents.trim_end().to_owned()
        })
    }

    /// Leaves the alternate screen without its closing sequence, e.g. when
    /// the program that drew it was killed.
    pub fn leave_alternate(&mut self) {
        self.state.alternate = None;
    }
}

/// One line of the window; `char`s so that overwriting a column is O(1).
type Line = Vec<char>;

/// Fills the columns a kept tab character spans; never rendered.
const TAB_FILL: char = '\0';

struct Renderer {
    rows: usize,
    cols: u16,
    nonce: Vec<u8>,
    /// The window of lines that can still change; the last is the newest.
    lines: VecDeque<Line>,
    /// Cursor row (index into `lines`) and column.
    row: usize,
    col: usize,
    saved_cursor: (usize, usize),
    committed: String,
    /// The emulator for a full-screen program, while one is showing.
    alternate: Option<vt100::Parser>,
    /// Set when parsing must stop and report to the caller.
    stop: Option<Stop>,
}

impl Renderer {
    fn in_alternate(&self) -> bool {
        self.alternate.is_some()
    }

    fn line(&mut self) -> &mut Line {
        &mut self.lines[self.row]
    }

    fn line_feed(&mut self) {
        self.row += 1;
        self.col = 0;
        if self.row < self.lines.len() {
            return;
        }
        if self.lines.len() < self.rows {
            self.lines.push_back(Vec::new());
            return;
        }
        // The top line scrolls out of reach: it is final now. Its buffer is
        // reused for the new line, so a long output allocates nothing per
        // line.
        let mut top = self.lines.pop_front().expect("the window is never empty");
        self.committed.extend(trailing_trimmed(&top));
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
            if last && line.is_empty() {
                break;
            }
            self.committed.extend(trailing_trimmed(line));
            if !last {
                self.committed.push('\n');
            }
        }
        if all {
            self.lines = VecDeque::from([Vec::new()]);
            self.row = 0;
            self.col = 0;
        } else {
            let n = n.min(self.lines.len() - 1);
            self.lines.drain(..n);
            self.row -= n.min(self.row);
            self.saved_cursor.0 = self.saved_cursor.0.saturating_sub(n);
        }
    }

    fn put_char(&mut self, c: char) {
        let col = self.col;
        let line = self.line();
        if col < line.len() {
            line[col] = c;
        } else {
            line.resize(col, ' ');
            line.push(c);
        }
        self.col += 1;
    }

    fn move_to_row(&mut self, row: usize) {
        while self.lines.len() <= row {
            self.lines.push_back(Vec::new());
        }
        self.row = row;
        if self.lines.len() > self.rows {
            let extra = self.lines.len() - self.rows;
            self.commit_lines(extra, false);
        }
    }

    fn erase_in_line(&mut self, mode: u16) {
        let col = self.col;
        let line = self.line();
        match mode {
            0 => line.truncate(col),
            1 => line.iter_mut().take(col + 1).for_each(|c| *c = ' '),
            _ => line.clear(),
        }
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
}

impl Perform for Renderer {
    fn print(&mut self, c: char) {
        if !self.in_alternate() {
            self.put_char(c);
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
            b'\t' => {
                let next = (self.col / 8 + 1) * 8;
                let col = self.col;
                let line = self.line();
                if col >= line.len() {
                    // Appending: keep the tab itself (agents parse
                    // tab-separated output), padded to its stop with
                    // placeholders that render as nothing.
                    line.resize(col, ' ');
                    line.push('\t');
                    line.resize(next, TAB_FILL);
                }
                self.col = next;
            }
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        if let Some(marker) = self.marker(params) {
            self.stop = Some(Stop::Marker(marker));
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0);
        if intermediates == b"?" && matches!(action, 'h' | 'l') {
            let alternate = params.iter().any(|p| matches!(p.first(), Some(47 | 1047 | 1049)));
            let on = action == 'h';
            if alternate && on != self.in_alternate() {
                self.stop = Some(Stop::AlternateScreen(on));
            }
            return;
        }
        if self.in_alternate() || !intermediates.is_empty() {
            return;
        }
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
            'B' | 'e' => self.move_to_row(self.row + count),
            'C' | 'a' => self.col += count,
            'D' => self.col = self.col.saturating_sub(count),
            'E' => {
                self.move_to_row(self.row + count);
                self.col = 0;
            }
            'F' => {
                self.row = self.row.saturating_sub(count);
                self.col = 0;
            }
            'G' | '`' => self.col = count - 1,
            'H' | 'f' => {
                // Absolute rows have no meaning in a scrolling log; keep
                // the row and honour the column.
                let col = params.iter().nth(1).and_then(|p| p.first().copied()).unwrap_or(1);
                self.col = usize::from(col.max(1)) - 1;
            }
            'X' => {
                let col = self.col;
                let line = self.line();
                for c in line.iter_mut().skip(col).take(count) {
                    *c = ' ';
                }
            }
            'P' => {
                let col = self.col;
                let line = self.line();
                if col < line.len() {
                    let end = (col + count).min(line.len());
                    line.drain(col..end);
                }
            }
            '@' => {
                let col = self.col;
                let line = self.line();
                if col < line.len() {
                    line.splice(col..col, std::iter::repeat_n(' ', count));
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
                (self.row, self.col) = self.saved_cursor;
                self.move_to_row(self.row.min(self.lines.len().saturating_sub(1)));
            }
            b'M' => self.row = self.row.saturating_sub(1),
            b'D' => self.line_feed(),
            b'E' => self.line_feed(),
            _ => {}
        }
    }

    fn terminated(&self) -> bool {
        self.stop.is_some()
    }
}

/// The characters of a finished line, without trailing blanks.
fn trailing_trimmed(line: &[char]) -> impl Iterator<Item = char> + '_ {
    let end = line.iter().rposition(|&c| c != ' ' && c != TAB_FILL).map_or(0, |i| i + 1);
    line[..end].iter().copied().filter(|&c| c != TAB_FILL)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `split` bytes (0 = whole) and returns the
    /// committed text with markers and screen switches written inline.
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
                        out.push_str(&screen.take_committed());
                        out.push_str(&format!("<{marker:?}>"));
                    }
                    Some(Stop::AlternateScreen(on)) => out.push_str(&format!("<alt {on}>")),
                    None => {}
                }
            }
        }
        if let Some(alternate) = screen.alternate_contents() {
            out.push_str(&format!("<screen {alternate:?}>"));
        }
        screen.commit_all();
        out.push_str(&screen.take_committed());
        out
    }

    /// Every case must render the same whole, split at every byte, and
    /// split into pairs.
    fn check(input: &[u8], expected: &str) {
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
    }
}
