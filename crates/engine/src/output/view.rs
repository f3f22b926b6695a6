//! What a reply shows of a stream: [`CappedOutput`] keeps its head and tail
//! in memory and turns them into a [`Shown`] (with the line that says what
//! was left out and where the complete stream is); [`Shown::fit`] cuts that
//! further to a JSON budget; an unfinished line is shown once, bounded.
//!
//! Invariant: memory stays bounded (about twice the cap) however much a
//! command prints; cuts fall on line boundaries where a line fits, and never
//! inside a masked secret.
//!
//! It writes no file and never decides where the complete stream is kept:
//! the sink moves the log to its file, and the view is told where it is
//! ([`Saved`]).

use std::path::PathBuf;

use super::measure::{byte_index_of_char, count_chars, count_lines, json_chars, json_weight};
use super::pass::Passed;
use super::spill::{Saved, SpillCut};
use crate::mask::MASK;

/// What an agent is shown of a stream, and where the rest is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// The text to show: the whole stream, or head, notice and tail.
    pub text: String,
    /// Whether anything was left out of `text`.
    pub truncated: bool,
    /// Characters left out of `text`.
    pub omitted_chars: u64,
    /// Lines (newline characters) left out of `text`.
    pub omitted_lines: u64,
    /// The file that holds the complete stream (the command's log), when
    /// what is shown left something out.
    pub full_output_path: Option<PathBuf>,
    /// Set when that file reached a size limit and the rest of the stream
    /// was not saved; the file ends with a line saying so.
    pub full_output_cut: Option<SpillCut>,
    /// Set when the full output could not be saved (the disk is full, the
    /// directory cannot be written): why. `full_output_path` is then unset.
    pub full_output_error: Option<String>,
    /// When `truncated`: the newline characters in the stream before the
    /// first character left out, so a reader can find that place by line.
    pub lines_before_omission: u64,
    /// When `truncated`: the byte range in `text` of the line that says what
    /// was left out (`[... N characters (M lines) omitted ...]`), so a reply
    /// can set it apart from the command's own text around it.
    pub omission: Option<std::ops::Range<usize>>,
    /// Secrets masked in `text` (each became `mask::MASK`).
    pub masked: u64,
}

impl Shown {
    /// Nothing to show.
    pub fn empty() -> Shown {
        Shown::default()
    }
}

/// A stream of text as a reply shows it: its head and tail, in memory
/// only. The complete stream is kept by the command's log
/// (`log::CommandLog`); [`CappedOutput::into_shown`] names it when the view
/// had to leave text out.
#[derive(Debug)]
pub(crate) struct CappedOutput {
    /// Characters kept at the start, and at the end, of the stream.
    half_cap: usize,
    /// Text at the start of the stream that an earlier reply already showed
    /// (see [`CappedOutput::push_seen`]): counted, never shown again.
    seen_chars: usize,
    seen_lines: usize,
    /// The first `half_cap` characters (the whole stream while it fits).
    head: String,
    head_chars: usize,
    /// Set once text went past the head: later text never goes into it,
    /// even when the head stopped short (before a masked secret).
    head_closed: bool,
    /// Text after the head; trimmed from the front once it is much longer
    /// than `half_cap` characters, to keep memory bounded.
    tail: String,
    tail_chars: usize,
    /// Whether the tail starts inside a line (text before it was dropped,
    /// and no line boundary was within reach).
    tail_in_line: bool,
    total_chars: u64,
    total_lines: u64,
    /// Secrets masked in the text pushed.
    masked: u64,
}

impl CappedOutput {
    /// A view that shows at most `cap` characters of what is new.
    pub(crate) fn new(cap: usize) -> CappedOutput {
        CappedOutput {
            half_cap: cap.max(2) / 2,
            seen_chars: 0,
            seen_lines: 0,
            head: String::new(),
            head_chars: 0,
            head_closed: false,
            tail: String::new(),
            tail_chars: 0,
            tail_in_line: false,
            total_chars: 0,
            total_lines: 0,
            masked: 0,
        }
    }

    /// Appends `text` to the stream.
    #[cfg(test)]
    pub(crate) fn push(&mut self, text: &Passed<'_>) {
        self.masked += text.masked();
        self.push_text(text.as_str());
    }

    fn push_text(&mut self, mut text: &str) {
        if text.is_empty() {
            return;
        }
        let n_chars = count_chars(text);
        self.total_chars += n_chars as u64;
        self.total_lines += count_lines(text.as_bytes()) as u64;
        if !self.head_closed && self.head_chars < self.half_cap {
            let room = self.half_cap - self.head_chars;
            let mut split = byte_index_of_char(text, room);
            if split < text.len() {
                // A masked secret is pushed whole: it goes all to the tail
                // if it does not fit the head.
                split = outside_mask(text, split, Side::Before);
                self.head_closed = true;
            }
            let (into_head, rest) = text.split_at(split);
            self.head.push_str(into_head);
            self.head_chars += count_chars(into_head);
            text = rest;
        }
        if !text.is_empty() {
            self.tail.push_str(text);
            self.tail_chars += count_chars(text);
            if self.tail_chars > 4 * self.half_cap.max(1024) {
                self.trim_tail(self.half_cap);
            }
        }
    }

    /// Appends text an earlier reply already showed (the start of a line
    /// that was unfinished then): it is counted, but not shown again. Only
    /// at the start of the stream, before any `CappedOutput::push`; later
    /// it is pushed as usual.
    fn push_seen(&mut self, text: &str) {
        if self.head_chars > 0 || self.tail_chars > 0 {
            self.push_text(text);
            return;
        }
        let (chars, lines) = (count_chars(text), count_lines(text.as_bytes()));
        self.total_chars += chars as u64;
        self.total_lines += lines as u64;
        self.seen_chars += chars;
        self.seen_lines += lines;
    }

    /// Appends committed `text` that may begin with the line a reply showed
    /// unfinished (`shown`): that part is counted but not shown again; the
    /// rest is pushed as usual. Committed text that is only the beginning
    /// of that line (the first rows of a wrapped line, which scroll off the
    /// screen before the line ends) is counted as seen too, and `shown`
    /// keeps the rest of it for the next piece; otherwise `shown` is done
    /// with. Returns whether `text` went on a line a reply had to cut, so
    /// the reply where it ends must name the saved copy (the sink decides
    /// what that means for the log).
    pub(crate) fn push_continuing(
        &mut self,
        shown: &mut Option<ShownLine>,
        text: &Passed<'_>,
    ) -> Continued {
        self.masked += text.masked();
        let text = text.as_str();
        let Some(line) = shown.take() else {
            self.push_text(text);
            return Continued::New;
        };
        if let Some(end) = line.prefix_in(text) {
            self.push_seen(&text[..end]);
            self.push_text(&text[end..]);
            return Continued::of(&line);
        }
        match line.after_beginning(text) {
            Some(rest) => {
                self.push_seen(text);
                *shown = rest;
                Continued::of(&line)
            }
            None => {
                self.push_text(text);
                Continued::New
            }
        }
    }

    /// Whether the new text outgrew the cap, so what is shown leaves some
    /// of it out.
    pub(crate) fn is_cut(&self) -> bool {
        self.total_chars - self.seen_chars as u64 > (2 * self.half_cap) as u64
    }

    /// Ends the view and returns what to show. `saved`, when given, is
    /// where the complete stream is kept: named in the omission line of a
    /// cut view, and in the fields of [`Shown`] either way.
    pub(crate) fn into_shown(mut self, saved: Option<Saved>) -> Shown {
        let cut = self.is_cut();
        if cut {
            self.trim_tail(self.half_cap);
        }
        let saved = saved.unwrap_or_default();
        let mut text = self.head;
        // The head ends after its last whole line; without one, its only
        // line is longer than half the cap and is cut inside.
        let mut head_in_line = false;
        if cut {
            match text.rfind('\n') {
                Some(end) => text.truncate(end + 1),
                None => head_in_line = !text.is_empty(),
            }
        }
        if !cut {
            // Within the cap: everything not seen before is in memory, and
            // nothing was left out.
            text.push_str(&self.tail);
            return Shown {
                text,
                full_output_path: saved.path,
                full_output_cut: saved.cut,
                full_output_error: saved.error,
                masked: self.masked,
                ..Shown::default()
            };
        }
        let new_chars = self.total_chars - self.seen_chars as u64;
        let shown_chars = count_chars(&text) + self.tail_chars;
        let omitted_chars = new_chars.saturating_sub(shown_chars as u64);
        let head_lines = count_lines(text.as_bytes());
        let shown_lines = (head_lines + count_lines(self.tail.as_bytes()) + self.seen_lines) as u64;
        let omitted_lines = self.total_lines.saturating_sub(shown_lines);
        let lines_before_omission = (self.seen_lines + head_lines) as u64;
        let inside = head_in_line || self.tail_in_line;
        let notice = omission_line(omitted_chars, omitted_lines, inside, &saved);
        let (text, omission) = with_omission(&text, &notice, &self.tail);
        Shown {
            text,
            truncated: true,
            omitted_chars,
            omitted_lines,
            full_output_path: saved.path,
            full_output_cut: saved.cut,
            full_output_error: saved.error,
            lines_before_omission,
            omission: Some(omission),
            masked: self.masked,
        }
    }

    /// The last non-blank line pushed so far (for progress messages).
    pub(crate) fn last_line(&self) -> &str {
        let text = if self.tail.trim().is_empty() { &self.head } else { &self.tail };
        text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("")
    }

    /// Drops characters from the front of the tail until at most `keep`
    /// remain, and on to the start of the next line when one starts in what
    /// is left; else (one line longer than `keep`) it starts inside that
    /// line, never inside a masked secret.
    fn trim_tail(&mut self, keep: usize) {
        if self.tail_chars <= keep {
            return;
        }
        let mut split = byte_index_of_char(&self.tail, self.tail_chars - keep);
        if self.tail.as_bytes()[split - 1] == b'\n' {
            self.tail_in_line = false;
        } else {
            // A line that starts in what is left, other than after its
            // last character.
            let rest = &self.tail.as_bytes()[split..];
            match rest[..rest.len().saturating_sub(1)].iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    split += newline + 1;
                    self.tail_in_line = false;
                }
                None => {
                    split = outside_mask(&self.tail, split, Side::After);
                    self.tail_in_line = true;
                }
            }
        }
        self.tail_chars -= count_chars(&self.tail[..split]);
        self.tail.drain(..split);
    }
}

/// What committed text was to the line a reply showed unfinished
/// ([`CappedOutput::push_continuing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Continued {
    /// New text, or the rest of a line that was shown whole.
    New,
    /// The rest of a line a reply had to cut: the reply that shows where
    /// it ends must name the saved copy, which holds the part left out.
    CutLine,
}

impl Continued {
    /// What text continuing the shown `line` is.
    fn of(line: &ShownLine) -> Continued {
        if line.cut { Continued::CutLine } else { Continued::New }
    }
}

/// Which way [`outside_mask`] moves a cut.
#[derive(Clone, Copy)]
enum Side {
    /// To the start of the masked secret: the cut ends what is shown.
    Before,
    /// To its end: the cut starts what is shown.
    After,
}

/// The byte index `at` of `text`, moved out of a masked secret
/// (`<secret-hidden>`) it falls inside, so a cut never shows part of one.
fn outside_mask(text: &str, at: usize, side: Side) -> usize {
    // The mask is ASCII: its bytes can be compared wherever they are.
    let bytes = text.as_bytes();
    let first = at.saturating_sub(MASK.len() - 1);
    let inside = (first..at).find(|&start| bytes[start..].starts_with(MASK.as_bytes()));
    match (inside, side) {
        (Some(start), Side::Before) => start,
        (Some(start), Side::After) => start + MASK.len(),
        (None, _) => at,
    }
}

/// The line that says what a cut left out of a stream, and where the
/// complete stream is: `[... N characters (M lines) omitted; full output in
/// PATH ...]`, with its newline. `inside`: a line too long to show whole
/// was cut inside.
fn omission_line(omitted_chars: u64, omitted_lines: u64, inside: bool, saved: &Saved) -> String {
    let where_kept = match (&saved.error, &saved.path, saved.cut) {
        (None, Some(path), None) => format!("; full output in {}", path.display()),
        (None, Some(path), Some(cut)) => {
            format!("; full output in {} ({})", path.display(), cut.in_output())
        }
        (Some(err), _, _) => format!("; the full output could not be saved: {err}"),
        _ => String::new(),
    };
    let inside = if inside { ", cutting inside a line too long to show whole" } else { "" };
    format!(
        "[... {omitted_chars} characters ({omitted_lines} lines) omitted{inside}{where_kept} ...]\n"
    )
}

impl Shown {
    /// The characters what is shown takes inside a JSON string.
    pub fn json_chars(&self) -> usize {
        json_chars(&self.text)
    }

    /// Cuts what is shown further, so that the command's text in it takes
    /// at most `budget` characters inside a JSON string (the omission line,
    /// a notice of bounded size, is not counted, as [`CappedOutput`] does
    /// not count it against its cap): a reply that carries several
    /// outputs, or a `run` whose two streams share one cap, gives each a
    /// part of one budget. The cut falls on line boundaries as
    /// [`CappedOutput`]'s does (only a line too long for its half is cut
    /// inside, never inside a masked secret); the counts, the line the
    /// omission starts at and the omission line are updated, and `saved`
    /// (called only when nothing was cut before) says where the complete
    /// stream is. A screen or other text with no omission line is cut the
    /// same way, with one added.
    pub fn fit(&mut self, budget: usize, saved: impl FnOnce() -> Saved) {
        let total = self.json_chars();
        if total <= budget {
            return;
        }
        if !self.truncated {
            let saved = saved();
            self.full_output_path = saved.path;
            self.full_output_cut = saved.cut;
            self.full_output_error = saved.error;
        }
        let text = std::mem::take(&mut self.text);
        let (head, tail, was_inside) = halves(&text, self.omission.as_ref(), total);
        // The head: whole lines within half the budget; the tail: whole
        // lines within the rest. A head cut inside a line gets a newline
        // before the omission line.
        let head_cut = head_within(head, budget / 2);
        let new_head = &head[..head_cut.at];
        let added = if new_head.is_empty() || new_head.ends_with('\n') { 0 } else { 2 };
        let tail_cut = tail_within(tail, budget.saturating_sub(json_chars(new_head) + added));
        self.count_dropped(&head[head_cut.at..], &tail[..tail_cut.at], new_head);
        let inside = was_inside || head_cut.inside || tail_cut.inside;
        let notice = omission_line(self.omitted_chars, self.omitted_lines, inside, &self.saved());
        let (text, omission) = with_omission(new_head, &notice, &tail[tail_cut.at..]);
        self.text = text;
        self.omission = Some(omission);
        self.truncated = true;
    }

    /// Where the complete stream is, as the fields say.
    fn saved(&self) -> Saved {
        Saved {
            path: self.full_output_path.clone(),
            cut: self.full_output_cut,
            error: self.full_output_error.clone(),
        }
    }

    /// Counts the text a fit drops (`dropped_head`, `dropped_tail`) as
    /// left out, and where the omission starts now that the head is
    /// `new_head`.
    fn count_dropped(&mut self, dropped_head: &str, dropped_tail: &str, new_head: &str) {
        let newlines = |text: &str| count_lines(text.as_bytes()) as u64;
        self.omitted_chars += (count_chars(dropped_head) + count_chars(dropped_tail)) as u64;
        self.omitted_lines += newlines(dropped_head) + newlines(dropped_tail);
        self.lines_before_omission = if self.truncated {
            self.lines_before_omission.saturating_sub(newlines(dropped_head))
        } else {
            newlines(new_head)
        };
    }
}

/// `text` (of `total` JSON characters) in the two parts a fit cuts: around
/// its omission line when it has one (and whether that line says a line was
/// cut inside), else at the middle of its JSON weight.
fn halves<'t>(
    text: &'t str,
    omission: Option<&std::ops::Range<usize>>,
    total: usize,
) -> (&'t str, &'t str, bool) {
    let omission =
        omission.filter(|range| text.get((*range).clone()).is_some_and(|l| l.starts_with("[... ")));
    if let Some(range) = omission {
        let line = &text[range.clone()];
        return (&text[..range.start], &text[range.end..], line.contains("cutting inside"));
    }
    let mut weight = 0;
    let mid = text
        .char_indices()
        .find(|&(_, c)| {
            weight += json_weight(c);
            weight > total / 2
        })
        .map_or(text.len(), |(i, _)| i);
    (&text[..mid], &text[mid..], false)
}

/// Where a fit cuts one part: the byte index, and whether it falls inside
/// a line (one line too long for its room).
struct Cut {
    /// The end of the head kept, or the start of the tail kept.
    at: usize,
    /// Whether the cut falls inside a line.
    inside: bool,
}

/// The end of the longest head of `head` within `room` JSON characters:
/// after its last whole line, or (no whole line fits) inside its first
/// line, never inside a masked secret.
fn head_within(head: &str, room: usize) -> Cut {
    let end = prefix_within(head, room);
    if end == head.len() {
        return Cut { at: end, inside: false };
    }
    match head[..end].rfind('\n') {
        Some(newline) => Cut { at: newline + 1, inside: false },
        None => {
            let at = outside_mask(head, end, Side::Before);
            Cut { at, inside: at > 0 }
        }
    }
}

/// The start of the longest tail of `tail` within `room` JSON characters:
/// at the start of a line, or (no line starts in reach) inside its last
/// line, never inside a masked secret.
fn tail_within(tail: &str, room: usize) -> Cut {
    let start = suffix_within(tail, room);
    if start == 0 || tail.as_bytes()[start - 1] == b'\n' {
        return Cut { at: start, inside: false };
    }
    let rest = &tail.as_bytes()[start..];
    match rest[..rest.len().saturating_sub(1)].iter().position(|&b| b == b'\n') {
        Some(newline) => Cut { at: start + newline + 1, inside: false },
        None => {
            let at = outside_mask(tail, start, Side::After);
            Cut { at, inside: at < tail.len() }
        }
    }
}

/// `head`, the omission line `notice` and `tail` as one text (a head that
/// ends inside a line gets a newline first), and the notice's byte range in
/// it.
fn with_omission(head: &str, notice: &str, tail: &str) -> (String, std::ops::Range<usize>) {
    let mut text = head.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let start = text.len();
    text.push_str(notice);
    let end = text.len();
    text.push_str(tail);
    (text, start..end)
}

/// The byte length of the longest prefix of `text` within `room` JSON
/// characters.
fn prefix_within(text: &str, room: usize) -> usize {
    let mut weight = 0;
    for (i, c) in text.char_indices() {
        weight += json_weight(c);
        if weight > room {
            return i;
        }
    }
    text.len()
}

/// The byte index where the longest suffix of `text` within `room` JSON
/// characters starts.
fn suffix_within(text: &str, room: usize) -> usize {
    let mut weight = 0;
    for (i, c) in text.char_indices().rev() {
        weight += json_weight(c);
        if weight > room {
            return i + c.len_utf8();
        }
    }
    0
}

/// `text` cut to at most `cap` characters: its head and tail around a
/// notice that says how much was left out and `why_missing` (where the rest
/// is, or will be). Returns the text and the number of characters omitted.
/// For one line (an unfinished one): it is cut inside, never inside a
/// masked secret.
pub(crate) fn head_tail(text: &str, cap: usize, why_missing: &str) -> (String, u64) {
    let n_chars = count_chars(text);
    if n_chars <= cap {
        return (text.to_owned(), 0);
    }
    let half = cap / 2;
    let head_end = outside_mask(text, byte_index_of_char(text, half), Side::Before);
    let tail_start = outside_mask(text, byte_index_of_char(text, n_chars - half), Side::After);
    let omitted =
        (n_chars - count_chars(&text[..head_end]) - count_chars(&text[tail_start..])) as u64;
    let shown = format!(
        "{}\n[... {omitted} characters omitted{why_missing} ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    (shown, omitted)
}

/// The unfinished line a reply showed, to recognise it when it has grown
/// or is committed. It holds the line's text: at most what the screen
/// holds of one line (its window), never more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShownLine {
    text: String,
    /// Part of it was left out of the reply (it was longer than the room),
    /// so the full output must keep it.
    cut: bool,
}

impl ShownLine {
    fn of(line: &str, cut: bool) -> Option<ShownLine> {
        (!line.is_empty()).then(|| ShownLine { text: line.to_owned(), cut })
    }

    /// The byte length of the shown line at the start of `text`, if `text`
    /// starts with it (or with it less its trailing blanks, which a
    /// committed line loses: a prompt shown as `ask> ` comes back as `ask>`
    /// where the line ended right there).
    fn prefix_in(&self, text: &str) -> Option<usize> {
        if text.starts_with(&self.text) {
            return Some(self.text.len());
        }
        let trimmed = self.text.trim_end_matches(' ');
        let end = trimmed.len();
        // Only where the line ends: `ask>` then a newline, or the end.
        (end > 0
            && text.starts_with(trimmed)
            && matches!(text.as_bytes().get(end), None | Some(b'\n')))
        .then_some(end)
    }

    /// When `text`, with no line end in it, is the beginning of the shown
    /// line and shorter than it: the rest of the line (`None` within the
    /// option when nothing is left).
    fn after_beginning(&self, text: &str) -> Option<Option<ShownLine>> {
        let rest =
            self.text.strip_prefix(text).filter(|_| !text.is_empty() && !text.contains('\n'))?;
        Some(ShownLine::of(rest, self.cut))
    }
}

/// What a reply shows of the line a command has not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnfinishedLine {
    /// The text to show.
    pub text: String,
    /// Characters of it left out.
    pub omitted: u64,
    /// What to pass as `before` next time, and to
    /// [`CappedOutput::push_continuing`] when the line is committed.
    pub shown: Option<ShownLine>,
    /// Secrets masked in the line.
    pub masked: u64,
}

/// The unfinished `line` as a reply shows it: only what is new since
/// `before` (the line the last reply showed, if this one continues it),
/// cut to `room` characters (head and tail). Bound: `room` characters plus
/// a notice, however long the line; time linear in its length.
pub(super) fn show_unfinished_line(
    line: &str,
    before: Option<&ShownLine>,
    room: usize,
) -> UnfinishedLine {
    let skip = before.and_then(|shown| shown.prefix_in(line)).unwrap_or(0);
    let why = " from this unfinished line; they will be in the full output file once it ends";
    let (text, omitted) = head_tail(&line[skip..], room, why);
    // A cut earlier part that is still unsaved stays owed to the file.
    let cut = omitted > 0 || before.is_some_and(|before| before.cut && skip > 0);
    UnfinishedLine { text, omitted, shown: ShownLine::of(line, cut), masked: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::measure::share;
    use crate::output::pass::tests::plain;
    use crate::output::spill::SpillLimit;

    fn saved_at(path: &str) -> Saved {
        Saved { path: Some(PathBuf::from(path)), ..Saved::default() }
    }

    #[test]
    fn short_streams_are_shown_whole() {
        let mut out = CappedOutput::new(100);
        out.push(&plain("hello "));
        out.push(&plain("world\n"));
        assert!(!out.is_cut());
        let shown = out.into_shown(None);
        assert_eq!(shown.text, "hello world\n");
        assert!(!shown.truncated);
        assert_eq!(shown.full_output_path, None);
    }

    #[test]
    fn long_streams_keep_head_and_tail_and_name_the_saved_copy() {
        let mut out = CappedOutput::new(20);
        let full: String = (0..1000).map(|i| format!("{i}\n")).collect();
        // Split into odd pieces, including multi-byte characters.
        for piece in full.as_bytes().chunks(7) {
            out.push(&plain(std::str::from_utf8(piece).expect("ascii")));
        }
        out.push(&plain("é€\n"));
        assert!(out.is_cut());
        let shown = out.into_shown(Some(saved_at("/saved/it.log")));
        assert!(shown.truncated);
        assert!(shown.text.starts_with("0\n1\n2\n3\n4\n"), "{}", shown.text);
        assert!(shown.text.ends_with("999\né€\n"), "{}", shown.text);
        // The tail starts with a whole line: "999", not "98" of "998".
        let expected_total = full.chars().count() as u64 + 3;
        assert_eq!(shown.omitted_chars, expected_total - 10 - 7);
        // The head holds lines 0-4 whole; line 5 starts the omission.
        assert_eq!(shown.lines_before_omission, 5);
        let omission = &shown.text[shown.omission.clone().expect("a notice")];
        assert!(omission.starts_with("[... ") && omission.ends_with(" ...]\n"), "{omission}");
        assert!(omission.contains("; full output in /saved/it.log ..."), "{omission}");
        assert_eq!(shown.full_output_path, Some(PathBuf::from("/saved/it.log")));
    }

    /// `text` pushed in pieces of `piece` bytes (at character boundaries)
    /// into a view of `cap` characters; its head, omission line and tail.
    fn cut(text: &str, cap: usize, piece: usize) -> (Shown, String, String, String) {
        let mut out = CappedOutput::new(cap);
        let mut rest = text;
        while !rest.is_empty() {
            let mut at = piece.min(rest.len());
            while !rest.is_char_boundary(at) {
                at += 1;
            }
            out.push(&plain(&rest[..at]));
            rest = &rest[at..];
        }
        let shown = out.into_shown(None);
        let range = shown.omission.clone().expect("cut");
        // A head cut inside a line gets a newline before the notice.
        let mut head = shown.text[..range.start].to_owned();
        if !text.starts_with(&head) {
            assert_eq!(head.pop(), Some('\n'), "the head comes from the text");
        }
        let notice = shown.text[range.clone()].to_owned();
        let tail = shown.text[range.end..].to_owned();
        (shown, head, notice, tail)
    }

    /// Issue 14: the head and tail of a cut fall on line boundaries, from
    /// several sides, and what is shown plus what is left out is the whole.
    #[test]
    fn cuts_fall_on_line_boundaries() {
        let short: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let mixed: String = (0..300)
            .map(
                |i| if i % 7 == 3 { format!("{}\n", "m".repeat(40 + i)) } else { format!("{i}\n") },
            )
            .collect();
        let wide: String =
            (0..400).map(|i| format!("{i} é€😀 ünïcödé {}\n", "ß".repeat(i % 13))).collect();
        for (name, text) in [("short lines", &short), ("a mix", &mixed), ("multi-byte", &wide)] {
            for (cap, piece) in [(200, 1), (200, 7), (1000, 4096), (333, 13)] {
                let (shown, head, notice, tail) = cut(text, cap, piece);
                let what = format!("{name}, cap {cap}, pieces of {piece}");
                assert!(head.ends_with('\n') && text.starts_with(&head), "{what}: {head:?}");
                assert!(text.ends_with(&tail), "{what}: {tail:?}");
                let before_tail = &text[..text.len() - tail.len()];
                assert!(before_tail.ends_with('\n'), "{what}: the tail starts a line: {tail:?}");
                assert!(!notice.contains("inside a line"), "{what}: {notice}");
                let shown_chars = count_chars(&head) + count_chars(&tail);
                assert_eq!(
                    shown_chars as u64 + shown.omitted_chars,
                    count_chars(text) as u64,
                    "{what}"
                );
                let lines = |t: &str| t.matches('\n').count() as u64;
                assert_eq!(
                    lines(&head) + lines(&tail) + shown.omitted_lines,
                    lines(text),
                    "{what}"
                );
                assert_eq!(shown.lines_before_omission, lines(&head), "{what}");
                assert!(shown_chars <= cap, "{what}: {shown_chars}");
                assert!(
                    notice.starts_with(&format!(
                        "[... {} characters ({} lines) omitted",
                        shown.omitted_chars, shown.omitted_lines
                    )),
                    "{what}: {notice}"
                );
            }
        }
    }

    /// Issue 14: a line longer than half the cap is the one cut inside a
    /// line, and the omission line says so.
    #[test]
    fn only_a_line_too_long_is_cut_inside() {
        let huge = format!("{}\n", "x".repeat(100_000));
        let (shown, head, notice, tail) = cut(&huge, 200, 4096);
        assert_eq!(
            (head.as_str(), tail.as_str()),
            ("x".repeat(100).as_str(), format!("{}\n", "x".repeat(99)).as_str())
        );
        assert_eq!(shown.omitted_chars, 100_001 - 200);
        assert!(notice.contains(", cutting inside a line too long to show whole"), "{notice}");
        // A huge line between short ones: the short lines are whole, the
        // huge one left out whole.
        let text = format!("a\nb\n{}\nc\nd\n", "y".repeat(10_000));
        let (_, head, notice, tail) = cut(&text, 200, 333);
        assert_eq!((head.as_str(), tail.as_str()), ("a\nb\n", "c\nd\n"));
        assert!(!notice.contains("inside a line"), "{notice}");
        // A huge first line and last line: both cut inside.
        let text = format!("{}\nmiddle\n{}", "h".repeat(5000), "t".repeat(5000));
        let (_, head, notice, tail) = cut(&text, 200, 97);
        assert_eq!(
            (head.as_str(), tail.as_str()),
            ("h".repeat(100).as_str(), "t".repeat(100).as_str())
        );
        assert!(notice.contains("inside a line"), "{notice}");
        // Multi-byte characters at the boundary of a line cut inside.
        let text = "é€😀".repeat(1000);
        let (shown, head, _, tail) = cut(&text, 100, 5);
        assert_eq!(count_chars(&head) + count_chars(&tail), 100);
        assert_eq!(shown.omitted_chars, 3000 - 100);
    }

    /// Issue 18: a reply's outputs share one budget counted as JSON writes
    /// them; a cut output is cut further, a whole one gets a cut, and
    /// either way what is shown, what is left out and the line the
    /// omission starts at add up to the stream.
    #[test]
    fn fitting_a_budget_counts_json_escapes_and_keeps_the_accounts() {
        let lines: String = (0..3000).map(|i| format!("\"{i}\"\\\t\u{1}\n")).collect();
        let long_line = format!("{}\n", "\u{1b}x".repeat(5000));
        let with_line: String = format!("start\n{long_line}end\n");
        for (text, cap) in
            [(&lines, 100_000), (&lines, 4_000), (&long_line, 100_000), (&with_line, 1_000)]
        {
            let mut out = CappedOutput::new(cap);
            out.push(&plain(text));
            let cut = out.is_cut();
            let mut shown = out.into_shown(cut.then(|| saved_at("/saved/it.log")));
            for budget in [3_000, 1_500, 700] {
                shown.fit(budget, || saved_at("/saved/it.log"));
                assert!(shown.truncated);
                let range = shown.omission.clone().expect("an omission line");
                let notice = &shown.text[range.clone()];
                let own = shown.json_chars() - json_chars(notice);
                assert!(own <= budget, "{own} > {budget}");
                assert!(notice.contains("; full output in /saved/it.log ..."), "{notice}");
                let head = &shown.text[..range.start];
                let tail = &shown.text[range.end..];
                assert!(text.starts_with(head.trim_end_matches('\n')), "the head is the start");
                assert!(text.ends_with(tail), "the tail is the end");
                let head_lines = head.matches('\n').count() as u64;
                if text.starts_with(head) {
                    assert_eq!(shown.lines_before_omission, head_lines);
                    let shown_chars = (count_chars(head) + count_chars(tail)) as u64;
                    assert_eq!(shown.omitted_chars + shown_chars, count_chars(text) as u64);
                    let all_lines = text.matches('\n').count() as u64;
                    assert_eq!(
                        shown.omitted_lines + head_lines + tail.matches('\n').count() as u64,
                        all_lines
                    );
                }
                assert!(
                    notice.contains(&format!(
                        "[... {} characters ({} lines)",
                        shown.omitted_chars, shown.omitted_lines
                    )),
                    "{notice}"
                );
            }
        }
        // Within the budget: untouched, and the saved copy is not asked for.
        let mut small = CappedOutput::new(100);
        small.push(&plain("ok\n"));
        let mut shown = small.into_shown(None);
        shown.fit(10, || unreachable!("nothing to cut"));
        assert_eq!((shown.text.as_str(), shown.truncated), ("ok\n", false));
    }

    #[test]
    fn a_budget_is_shared_fairly() {
        assert_eq!(share(100, &[10, 500]), vec![10, 90]);
        assert_eq!(share(100, &[500, 500]), vec![50, 50]);
        assert_eq!(share(100, &[30, 20, 10]), vec![30, 20, 10]);
        assert_eq!(share(90, &[100, 5, 100]), vec![42, 5, 43]);
        assert_eq!(share(10, &[]), Vec::<usize>::new());
        assert_eq!(json_chars("a\"\\\n\u{1b}é"), 1 + 2 + 2 + 2 + 6 + 1);
        assert_eq!(
            json_chars("a\"\\\n\u{1b}é"),
            serde_json::to_string("a\"\\\n\u{1b}é").unwrap().chars().count() - 2
        );
    }

    /// Issue 14: a cut never splits a masked secret, wherever it falls.
    #[test]
    fn a_cut_never_splits_a_masked_secret() {
        for offset in 0..MASK.len() + 2 {
            // One long line: the cut is inside it, near masks at every
            // offset from the head's end and the tail's start.
            let line = format!("{}{}", "a".repeat(100 - offset), MASK.repeat(400));
            let text = format!("{line}{}", "z".repeat(offset));
            let (_, head, _, tail) = cut(&text, 200, 4096);
            for part in [&head, &tail] {
                let rest = part.replace(MASK, "");
                assert!(!rest.contains('<') && !rest.contains('>'), "offset {offset}: {part:?}");
            }
            assert!(count_chars(&head) <= 100 && count_chars(&tail) <= 100, "offset {offset}");
            // An unfinished line is cut the same way.
            let (shown, _) = head_tail(&text, 200, "");
            let rest = shown.replace(MASK, "");
            assert!(!rest.contains('<') && !rest.contains('>'), "offset {offset}: {shown:?}");
        }
    }

    #[test]
    fn a_cut_or_unsaved_copy_is_named_in_the_omission_line() {
        let cut = SpillCut { after_bytes: 700, limit: SpillLimit::PerCommand(1000) };
        let saved = Saved { cut: Some(cut), ..saved_at("/saved/it.log") };
        let mut out = CappedOutput::new(10);
        out.push(&plain(&"a".repeat(100)));
        let shown = out.into_shown(Some(saved));
        assert!(shown.text.contains("full output in /saved/it.log (cut after 700 bytes"));
        assert_eq!(shown.full_output_cut, Some(cut));
        let mut out = CappedOutput::new(10);
        out.push(&plain(&"a".repeat(100)));
        let unsaved = Saved { error: Some("No space left".into()), ..Saved::default() };
        let shown = out.into_shown(Some(unsaved));
        assert!(shown.text.contains("the full output could not be saved: No space left"));
        assert_eq!(shown.full_output_error.as_deref(), Some("No space left"));
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        let mut out = CappedOutput::new(10);
        out.push(&plain("0123456789"));
        assert!(!out.is_cut());
        let shown = out.into_shown(None);
        assert_eq!((shown.text.as_str(), shown.truncated), ("0123456789", false));
    }

    #[test]
    fn text_seen_before_is_counted_but_not_shown_again() {
        // Small: shown only as the new part.
        let mut out = CappedOutput::new(100);
        out.push_seen("Password");
        out.push(&plain(": ok\n"));
        let shown = out.into_shown(None);
        assert_eq!((shown.text.as_str(), shown.truncated), (": ok\n", false));
        // Much seen text does not make the new text cut.
        let mut out = CappedOutput::new(100);
        out.push_seen(&"x".repeat(500));
        out.push(&plain("done\n"));
        assert!(!out.is_cut());
        assert_eq!(out.into_shown(None).text, "done\n");
        // Large new output after it: omitted counts only what is new, and
        // the omission starts after the seen lines.
        let mut out = CappedOutput::new(10);
        out.push_seen("seen\n");
        out.push(&plain(&"y".repeat(100)));
        let shown = out.into_shown(None);
        assert_eq!(shown.omitted_chars, 90);
        assert_eq!(shown.lines_before_omission, 1);
    }

    #[test]
    fn an_unfinished_line_is_shown_once_and_bounded() {
        let first = show_unfinished_line("Password", None, 100);
        assert_eq!((first.text.as_str(), first.omitted), ("Password", 0));
        // It grew: only the new part.
        let grown = show_unfinished_line("Password: ", first.shown.as_ref(), 100);
        assert_eq!(grown.text, ": ");
        // Unchanged: nothing.
        assert_eq!(show_unfinished_line("Password: ", grown.shown.as_ref(), 100).text, "");
        // Rewritten (a progress line after \r): shown whole again.
        let other = show_unfinished_line("Passw0rd", grown.shown.as_ref(), 100);
        assert_eq!(other.text, "Passw0rd");
        assert_eq!(show_unfinished_line("", other.shown.as_ref(), 100).shown, None);
        // Long: head and tail only, and the saved copy will be named.
        let long = "z".repeat(10_000);
        let cut = show_unfinished_line(&long, None, 100);
        assert_eq!(cut.omitted, 9_900);
        assert!(cut.text.len() < 300, "{}", cut.text);
        assert!(cut.shown.as_ref().is_some_and(|shown| shown.cut));
        let more = show_unfinished_line(&format!("{long}!"), cut.shown.as_ref(), 100);
        assert_eq!(more.text, "!");
        assert!(more.shown.as_ref().is_some_and(|shown| shown.cut), "still owed to the file");
    }

    #[test]
    fn a_committed_line_is_not_shown_again() {
        let line = show_unfinished_line("answer: ", None, 100);
        let mut out = CappedOutput::new(100);
        assert_eq!(
            out.push_continuing(&mut line.shown.clone(), &plain("answer: 42\nnext\n")),
            Continued::New
        );
        assert_eq!(out.into_shown(None).text, "42\nnext\n");
        // A different line is shown whole.
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut line.shown.clone(), &plain("done\n"));
        assert_eq!(out.into_shown(None).text, "done\n");
        // A line that was cut when shown asks for the saved copy.
        let long = "z".repeat(1000);
        let cut = show_unfinished_line(&long, None, 100);
        let mut out = CappedOutput::new(100);
        assert_eq!(
            out.push_continuing(&mut cut.shown.clone(), &plain(&format!("{long}\n"))),
            Continued::CutLine
        );
        assert_eq!(out.into_shown(None).text, "\n");
        // Issue 18: a wrapped line's first rows scroll off the screen and
        // are committed before the line ends: seen, and the rest is
        // recognised when it comes.
        let line = show_unfinished_line("first row|second row|", None, 100);
        let mut shown = line.shown.clone();
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first row|"));
        out.push_continuing(&mut shown, &plain("second row|and more\n"));
        assert_eq!(out.into_shown(None).text, "and more\n");
        assert_eq!(shown, None);
        // What comes after its beginning that is not the rest of it is
        // new, and ends the match.
        let mut shown = line.shown.clone();
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first"));
        out.push_continuing(&mut shown, &plain(" other\n"));
        assert_eq!(out.into_shown(None).text, " other\n");
        let mut shown = line.shown;
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first row|\n"));
        assert_eq!(out.into_shown(None).text, "first row|\n");
        assert_eq!(shown, None);
    }

    #[test]
    fn head_tail_bounds_any_text() {
        assert_eq!(head_tail("short", 10, ""), ("short".to_owned(), 0));
        let (shown, omitted) = head_tail(&"é".repeat(1000), 10, "; see the file");
        assert_eq!(omitted, 990);
        assert_eq!(
            shown,
            format!(
                "{}\n[... 990 characters omitted; see the file ...]\n{}",
                "é".repeat(5),
                "é".repeat(5)
            )
        );
    }
}
