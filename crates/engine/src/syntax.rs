//! Bash syntax, as far as shellkeep needs it without running bash: whether
//! a command is complete or bash would wait for more lines
//! ([`is_incomplete`]), and the parts of a compound command
//! ([`command_parts`]) with the words before a part's command
//! ([`command_of`], [`skip_assignments`], [`split_word`]), which the
//! timeout policy matches.
//!
//! Not here: sessions (an incomplete command is held by
//! `session::incomplete`) or the policy.
//!
//! Invariant: the completeness check runs `bash -n` on the text (through a
//! pipe, never a file) and nothing else; the parts are a pure, bounded,
//! linear scan that runs nothing and never fails.

use std::path::Path;
use std::time::Duration;

/// Whether bash would wait for more lines after `command`, as at a `>`
/// prompt: an unclosed quote, `if` without `fi`, an unfinished here-document,
/// a trailing `\`, `&&` or `|`. Checked with `bash -n` (in the C locale, so
/// the messages are known) only when the text could be incomplete; a real
/// syntax error is not incomplete (running it shows bash's message).
///
/// Bounded: the text goes through a pipe; the check is given 5 s.
pub(crate) async fn is_incomplete(shell: &Path, command: &str) -> bool {
    if ends_with_continuation(command) {
        return true;
    }
    if !could_be_incomplete(command) {
        return false;
    }
    let mut check =
        crate::process::group_command(shell, &crate::process::Scope::new("syntax-check"));
    check
        .arg("--norc")
        .arg("--noprofile")
        .arg("-n")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let Ok(mut child) = crate::process::spawn(&mut check) else { return false };
    let input = child.stdin.take();
    let text = command.to_owned();
    let feed = async move {
        if let Some(mut stdin) = input {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.write_all(b"\n").await;
        }
    };
    let run = async {
        feed.await;
        child.wait_with_output().await
    };
    let Ok(Ok(output)) = tokio::time::timeout(Duration::from_secs(5), run).await else {
        return false;
    };
    let messages = String::from_utf8_lossy(&output.stderr);
    messages.contains("unexpected end of file")
        || messages.contains("unexpected EOF while looking for matching")
        || messages.contains("delimited by end-of-file")
}

/// A line ending in an odd number of backslashes continues on the next.
fn ends_with_continuation(command: &str) -> bool {
    let trailing = command.bytes().rev().take_while(|&b| b == b'\\').count();
    trailing % 2 == 1
}

/// Whether `command` could leave bash waiting for more: it has a
/// construct a quick scan cannot close (brackets, substitutions, keywords,
/// here-documents), an unclosed quote, or ends with an operator. Plain
/// commands with balanced quotes (`ls -la`, `git commit -m "msg"`) skip
/// the `bash -n` check. Errs on the side of checking.
fn could_be_incomplete(command: &str) -> bool {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut quote = Quote::None;
    let mut chars = command.chars().peekable();
    let mut word_start = true;
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match c {
                '\\' => {
                    chars.next();
                }
                '"' => quote = Quote::None,
                '`' => return true,
                '$' if chars.peek() == Some(&'(') => return true,
                _ => {}
            },
            Quote::None => match c {
                '\\' => {
                    chars.next();
                }
                '\'' => quote = Quote::Single,
                '"' => quote = Quote::Double,
                '#' if word_start => {
                    // A comment: quotes in it do not count.
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                '`' | '(' | ')' | '{' | '}' | '[' | '<' => return true,
                _ => {}
            },
        }
        word_start = quote == Quote::None && (c.is_whitespace() || matches!(c, ';' | '&' | '|'));
    }
    if quote != Quote::None {
        return true;
    }
    if command.trim_end().ends_with(['|', '&']) {
        return true;
    }
    command.split(|c: char| c.is_whitespace() || c == ';').any(|word| {
        matches!(
            word,
            "if" | "then"
                | "else"
                | "elif"
                | "do"
                | "case"
                | "while"
                | "until"
                | "for"
                | "select"
                | "function"
        )
    })
}

/// At most this many parts of one command are returned; the rest are only
/// counted ([`Parts::omitted`]), so a megabyte of `a;` costs a count, not
/// a list.
pub const MAX_PARTS: usize = 256;

/// Parts nested deeper than this (subshells, groups and substitutions
/// inside each other) are not split out: they stay in the text of the part
/// around them. Real commands nest two or three deep.
pub(crate) const MAX_PART_DEPTH: usize = 16;

/// Constructs open at once (quotes, parentheses, substitutions) that the
/// scan tracks; past this it stops splitting, and the rest of the text
/// belongs to the parts open there. Also the most here-documents one line
/// opens that are skipped. The bound on the scan's memory besides its list
/// of parts.
const MAX_OPEN: usize = 1024;

/// One part of a compound command: a simple command as written, without
/// the operators around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part<'c> {
    /// Its text, without the blanks around it.
    pub text: &'c str,
    /// Where the text starts in the command, in bytes.
    pub start: usize,
    /// How many subshells, groups in parentheses, substitutions and
    /// backquotes it is inside: 0 at the top level.
    pub depth: usize,
}

/// The parts of a command, in the order they start in its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Parts<'c> {
    /// The first [`MAX_PARTS`] parts found, sorted by where they start.
    pub parts: Vec<Part<'c>>,
    /// How many more parts there were.
    pub omitted: usize,
}

/// A construct the scan is inside.
enum Open {
    /// A list of commands: the top level, `( … )` (a subshell, a function's
    /// parentheses, an array), `$( … )`, `<( … )`, `>( … )` or backquotes.
    List {
        /// What ends it.
        close: Close,
        /// Where its current part starts.
        start: usize,
        /// Whether its parts are returned: not for an array's words, nor
        /// deeper than [`MAX_PART_DEPTH`].
        emit: bool,
    },
    /// `" … "`, where only substitutions and `\` mean something.
    Double,
    /// `${ … }`.
    Parameter,
    /// `$(( … ))` or `(( … ))`, with the parentheses open inside it.
    Arithmetic { parens: usize },
    /// `[[ … ]]`, whose `&&`, `||`, `<`, `>` and parentheses are its own.
    Conditional,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    End,
    Paren,
    Backquote,
}

/// A here-document whose body starts after the current line.
struct HereDoc {
    delimiter: Vec<u8>,
    strip_tabs: bool,
}

/// The parts of `command`: the simple commands it runs, split at `&&`,
/// `||`, `;`, `|`, `&` and newlines (`;;` and `|&` included), and taken out
/// of `( … )`, `$( … )`, backquotes and `<( … )` (a part that contains a
/// substitution is returned too, with the substitution in its text). Quotes
/// (`'…'`, `"…"`, `$'…'`), `\`, `${ … }`, arithmetic, `[[ … ]]` and
/// here-document bodies never split, and comments are left out; `>&`, `&>`
/// and `>|` are redirections, not operators. A brace group's `{` and `}`
/// stay in their parts' text, for [`command_of`] to skip. Empty parts are
/// dropped.
///
/// Bounded: one pass over the bytes, no recursion; at most [`MAX_PARTS`]
/// parts are kept, splitting stops [`MAX_PART_DEPTH`] levels deep, and at
/// most 1024 constructs are tracked at once. Text that is not valid bash is
/// split as far as it goes, never an error: the parts serve the timeout
/// policy, whose mistakes only lengthen or shorten a limit.
pub(crate) fn command_parts(command: &str) -> Parts<'_> {
    let mut parts = PartCollector { command, parts: Vec::new(), omitted: 0 };
    let mut scan = Scan {
        bytes: command.as_bytes(),
        i: 0,
        open: vec![Open::List { close: Close::End, start: 0, emit: true }],
        lists: 1,
        here_docs: Vec::new(),
        word_start: true,
    };
    while scan.i < scan.bytes.len() && scan.step(&mut parts) {}
    scan.close_all(&mut parts);
    parts.finish()
}

/// The parts found so far, at most [`MAX_PARTS`] of them.
struct PartCollector<'c> {
    command: &'c str,
    parts: Vec<Part<'c>>,
    /// Parts past [`MAX_PARTS`], counted, not kept.
    omitted: usize,
}

impl<'c> PartCollector<'c> {
    /// The part `start..end` at `depth`, without its surrounding blanks;
    /// nothing when it is blank.
    fn push(&mut self, start: usize, end: usize, depth: usize) {
        let raw = self.command.get(start..end.min(self.command.len())).unwrap_or("");
        let text = raw.trim_matches(is_blank_char);
        if text.is_empty() {
            return;
        }
        if self.parts.len() < MAX_PARTS {
            let start = start + (raw.len() - raw.trim_start_matches(is_blank_char).len());
            self.parts.push(Part { text, start, depth });
        } else {
            self.omitted += 1;
        }
    }

    /// The parts in the order they start.
    fn finish(mut self) -> Parts<'c> {
        self.parts.sort_by_key(|part| part.start);
        Parts { parts: self.parts, omitted: self.omitted }
    }
}

/// The tokenizer of [`command_parts`]: one pass over the bytes, with the
/// constructs open at the current byte.
struct Scan<'b> {
    bytes: &'b [u8],
    /// The next byte to read.
    i: usize,
    /// The constructs open here, innermost last (at most [`MAX_OPEN`]).
    open: Vec<Open>,
    /// Lists open, the top level included: the depth of a new list's parts.
    lists: usize,
    /// Here-documents whose bodies start after the current line.
    here_docs: Vec<HereDoc>,
    /// Whether the current byte starts a word.
    word_start: bool,
}

impl Scan<'_> {
    /// The byte at `i`, or 0 past the end.
    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    /// Reads the token at `i` in the innermost open construct; false when
    /// the constructs are too deep to track and the scan stops (the rest
    /// belongs to the parts open here).
    fn step(&mut self, parts: &mut PartCollector<'_>) -> bool {
        let c = self.bytes[self.i];
        let Some(top) = self.open.last() else { return false };
        // Which construct starts at `i`, if any, and how many bytes it takes.
        let opens = match *top {
            Open::List { close, start, emit } => self.list_byte(c, close, start, emit, parts),
            Open::Double => self.closing(c == b'"', 1, false),
            Open::Parameter => self.closing(c == b'}', 1, true),
            Open::Conditional => {
                let closes = c == b']'
                    && self.at(self.i + 1) == b']'
                    && self.i > 0
                    && is_blank(self.bytes[self.i - 1]);
                self.closing(closes, 2, true)
            }
            Open::Arithmetic { .. } => self.arithmetic_byte(c),
        };
        self.word_start = matches!(c, b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')');
        if let Some((new, width)) = opens {
            if self.open.len() >= MAX_OPEN {
                return false;
            }
            if matches!(new, Open::List { .. }) {
                self.lists += 1;
                self.word_start = true;
            }
            self.open.push(new);
            self.i += width;
        }
        true
    }

    /// A byte of a quoted construct (`"…"`, `${…}`, `[[…]]`): its end
    /// (`closes`, `width` bytes long), or what [`quoted_byte`] makes of it.
    fn closing(&mut self, closes: bool, width: usize, quotes: bool) -> Option<(Open, usize)> {
        if closes {
            self.open.pop();
            self.i += width;
            return None;
        }
        let opens;
        (self.i, opens) = quoted_byte(self.bytes, self.i, self.lists, quotes);
        opens
    }

    /// A byte inside `$(( … ))` or `(( … ))`: parentheses are counted, and
    /// substitutions open.
    fn arithmetic_byte(&mut self, c: u8) -> Option<(Open, usize)> {
        let Some(Open::Arithmetic { parens }) = self.open.last_mut() else { return None };
        match c {
            b'(' => *parens += 1,
            b')' if *parens > 0 => *parens -= 1,
            b')' => {
                self.open.pop();
                self.i += if self.at(self.i + 1) == b')' { 2 } else { 1 };
                return None;
            }
            b'`' => return Some((list(Close::Backquote, self.i + 1, self.lists), 1)),
            b'$' => {
                let opens = dollar(self.bytes, self.i, self.lists);
                if opens.is_none() {
                    self.i += 1;
                }
                return opens;
            }
            _ => {}
        }
        self.i += 1;
        None
    }

    /// A byte of a list (commands): quotes and constructs open, the list's
    /// end closes it, and a comment or an operator ends a part.
    fn list_byte(
        &mut self,
        c: u8,
        close: Close,
        start: usize,
        emit: bool,
        parts: &mut PartCollector<'_>,
    ) -> Option<(Open, usize)> {
        let i = self.i;
        match c {
            b'\\' => self.i += 2,
            b'\'' => self.i = after(self.bytes, i + 1, b'\''),
            b'"' => return Some((Open::Double, 1)),
            b'`' if close == Close::Backquote => self.close_list(start, emit, parts),
            b'`' => return Some((list(Close::Backquote, i + 1, self.lists), 1)),
            b'$' => {
                let opens = dollar(self.bytes, i, self.lists);
                if opens.is_none() {
                    self.i +=
                        if self.at(i + 1) == b'\'' { ansi_c_end(self.bytes, i + 2) - i } else { 1 };
                }
                return opens;
            }
            b'[' if self.word_start && self.at(i + 1) == b'[' && is_blank(self.at(i + 2)) => {
                return Some((Open::Conditional, 2));
            }
            b'(' if self.word_start && self.at(i + 1) == b'(' => {
                return Some((Open::Arithmetic { parens: 0 }, 2));
            }
            b'(' => {
                let mut new = list(Close::Paren, i + 1, self.lists);
                // An array's words are not commands.
                if let Open::List { emit, .. } = &mut new
                    && i > 0
                    && self.bytes[i - 1] == b'='
                {
                    *emit = false;
                }
                return Some((new, 1));
            }
            b')' if close == Close::Paren => self.close_list(start, emit, parts),
            // A `)` that closes nothing ends a `case` pattern: the pattern
            // is not a command.
            b')' => {
                self.i += 1;
                self.set_start(self.i);
            }
            // A comment is not part of the command before it.
            b'#' if self.word_start => {
                if emit {
                    parts.push(start, i, self.lists - 1);
                }
                self.i = self.bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.bytes.len(), |p| i + p);
                self.set_start(self.i);
            }
            _ => self.list_operator(c, start, emit, parts),
        }
        None
    }

    /// A byte of a list that is not a quote or a construct: here-strings
    /// and here-documents, redirections that look like operators (`>&`,
    /// `&>`, `>|`), and the operators that end a part.
    fn list_operator(&mut self, c: u8, start: usize, emit: bool, parts: &mut PartCollector<'_>) {
        let i = self.i;
        let after_redirect = |bytes: &[u8], set: &[u8]| i > 0 && set.contains(&bytes[i - 1]);
        match c {
            b'<' if self.at(i + 1) == b'<' && self.at(i + 2) == b'<' => self.i += 3,
            b'<' if self.at(i + 1) == b'<' => {
                let (doc, end) = here_doc(self.bytes, i + 2);
                if self.here_docs.len() < MAX_OPEN {
                    self.here_docs.extend(doc);
                }
                self.i = end;
            }
            b'&' if after_redirect(self.bytes, b"<>") => self.i += 1,
            b'&' if self.at(i + 1) == b'>' => self.i += 1,
            b'|' if after_redirect(self.bytes, b">") => self.i += 1,
            b';' | b'&' | b'|' | b'\n' => {
                if emit {
                    parts.push(start, i, self.lists - 1);
                }
                self.i += 1;
                if c == b'\n' && !self.here_docs.is_empty() {
                    self.i = skip_here_docs(self.bytes, self.i, &self.here_docs);
                    self.here_docs.clear();
                }
                self.set_start(self.i);
            }
            _ => self.i += 1,
        }
    }

    /// The innermost list ends at `i`: its last part is kept.
    fn close_list(&mut self, start: usize, emit: bool, parts: &mut PartCollector<'_>) {
        if emit {
            parts.push(start, self.i, self.lists - 1);
        }
        self.open.pop();
        self.lists -= 1;
        self.i += 1;
    }

    /// The innermost list's next part starts at `at`.
    fn set_start(&mut self, at: usize) {
        if let Some(Open::List { start, .. }) = self.open.last_mut() {
            *start = at;
        }
    }

    /// What is still open ends with the text.
    fn close_all(&mut self, parts: &mut PartCollector<'_>) {
        while let Some(construct) = self.open.pop() {
            if let Open::List { start, emit, .. } = construct {
                self.lists -= 1;
                if emit {
                    parts.push(start, self.bytes.len(), self.lists);
                }
            }
        }
    }
}

/// What the byte at `i` means where only `\\`, substitutions and (with
/// `quotes`) quotes do: inside `"…"`, `${…}` and `[[…]]`. Returns where
/// the scan goes on and the construct that starts at `i`, if any (then
/// `i` is unchanged).
fn quoted_byte(
    bytes: &[u8],
    i: usize,
    lists: usize,
    quotes: bool,
) -> (usize, Option<(Open, usize)>) {
    match bytes[i] {
        b'\\' => (i + 2, None),
        b'\'' if quotes => (after(bytes, i + 1, b'\''), None),
        b'"' if quotes => (i, Some((Open::Double, 1))),
        b'`' => (i, Some((list(Close::Backquote, i + 1, lists), 1))),
        b'$' => match dollar(bytes, i, lists) {
            Some(opens) => (i, Some(opens)),
            None => (i + 1, None),
        },
        _ => (i + 1, None),
    }
}

/// A new list of commands whose text starts at `start`, inside `lists`
/// lists: its parts are returned unless it is too deep.
fn list(close: Close, start: usize, lists: usize) -> Open {
    Open::List { close, start, emit: lists <= MAX_PART_DEPTH }
}

/// What a `$` at `i` opens: `$((`, `$(`, `${`, or nothing.
fn dollar(bytes: &[u8], i: usize, lists: usize) -> Option<(Open, usize)> {
    match (bytes.get(i + 1), bytes.get(i + 2)) {
        (Some(b'('), Some(b'(')) => Some((Open::Arithmetic { parens: 0 }, 3)),
        (Some(b'('), _) => Some((list(Close::Paren, i + 2, lists), 2)),
        (Some(b'{'), _) => Some((Open::Parameter, 2)),
        _ => None,
    }
}

/// The index just after the first `quote` at or after `from`, or the end.
fn after(bytes: &[u8], from: usize, quote: u8) -> usize {
    let from = from.min(bytes.len());
    bytes[from..].iter().position(|&b| b == quote).map_or(bytes.len(), |p| from + p + 1)
}

/// The index just after the `'` that ends a `$'…'` whose text starts at
/// `from` (where `\'` does not end it), or the end.
fn ansi_c_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\'' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The here-document whose operator `<<` ends just before `from` (`<<-`
/// strips tabs), and the index after its delimiter word. The delimiter is
/// the word with its quotes removed.
fn here_doc(bytes: &[u8], from: usize) -> (Option<HereDoc>, usize) {
    let mut i = from;
    let strip_tabs = bytes.get(i) == Some(&b'-');
    if strip_tabs {
        i += 1;
    }
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    let mut delimiter = Vec::new();
    while let Some(&c) = bytes.get(i) {
        match c {
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' => break,
            b'\'' | b'"' => {
                let rest = &bytes[i + 1..];
                let close = rest.iter().position(|&b| b == c).unwrap_or(rest.len());
                delimiter.extend_from_slice(&rest[..close]);
                i += close + 2;
            }
            b'\\' => {
                delimiter.extend(bytes.get(i + 1));
                i += 2;
            }
            _ => {
                delimiter.push(c);
                i += 1;
            }
        }
    }
    let doc = (!delimiter.is_empty()).then_some(HereDoc { delimiter, strip_tabs });
    (doc, i.min(bytes.len()))
}

/// The index after the bodies of `docs`, which start at `from`: each body
/// ends with a line that is its delimiter (after leading tabs, for `<<-`),
/// or with the text.
fn skip_here_docs(bytes: &[u8], from: usize, docs: &[HereDoc]) -> usize {
    let mut i = from;
    for doc in docs {
        while i < bytes.len() {
            let end = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
            let mut line = &bytes[i..end];
            if doc.strip_tabs {
                while let [b'\t', rest @ ..] = line {
                    line = rest;
                }
            }
            i = (end + 1).min(bytes.len());
            if line == doc.delimiter.as_slice() {
                break;
            }
        }
    }
    i
}

/// The first shell word of `text` (blanks before it skipped) and the text
/// after it with its blanks skipped; `None` when only blanks are left. A
/// word keeps its quotes, escapes and substitutions (`"a b"`, `$(x y)`,
/// `` `x y` ``) as written. Linear in the word's length.
pub(crate) fn split_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start_matches(is_blank_char);
    if text.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    // Parentheses and braces open inside the word: `$(…)`, `<(…)`, `${…}`.
    let mut nested = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\'' => i = after(bytes, i + 1, b'\''),
            b'`' => i = after(bytes, i + 1, b'`'),
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'(' => {
                nested += 1;
                i += 1;
            }
            b'{' if i > 0 && bytes[i - 1] == b'$' => {
                nested += 1;
                i += 1;
            }
            b')' | b'}' if nested > 0 => {
                nested -= 1;
                i += 1;
            }
            b' ' | b'\t' | b'\n' if nested == 0 => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    Some((&text[..i], text[i..].trim_start_matches(is_blank_char)))
}

/// Reserved words that may come before a command, and that are not one.
const LEADING_RESERVED: &[&str] = &["!", "{", "if", "then", "elif", "else", "do", "while", "until"];

/// Reserved words that end a compound command: what follows them can only
/// be redirections or operators.
const CLOSING_RESERVED: &[&str] = &["}", "fi", "done", "esac"];

/// Reserved words whose clause up to the next operator is not a command:
/// `for i in a b`, `select x in …` (`case $x in` is skipped word by word:
/// its first item can follow on the same line).
const HEADER_RESERVED: &[&str] = &["for", "select"];

/// The command a part runs: the part without the reserved words before it
/// (`if`, `then`, `elif`, `else`, `do`, `while`, `until`, `!`, `{`, `time`
/// with its `-p`) and without a function definition's header
/// (`function f {`, `f() {`). `None` when the part runs no command of its
/// own: empty, a closing word (`fi`, `done`, `esac`, `}`), a `for`,
/// `select` or `case` header (a `case` item on the same line is kept), a
/// `[[ … ]]` test, or a subshell `( … )` or arithmetic `(( … ))`, whose
/// commands are parts of their own ([`command_parts`]).
pub(crate) fn command_of(part: &str) -> Option<&str> {
    let mut text = part.trim_start_matches(is_blank_char);
    loop {
        let (word, rest) = split_word(text)?;
        if word == "[[" || CLOSING_RESERVED.contains(&word) || HEADER_RESERVED.contains(&word) {
            return None;
        }
        if word == "case" {
            // `case WORD in`, then maybe the first item's `(pattern)`.
            let (_, rest) = split_word(rest)?;
            text = split_word(rest).filter(|(word, _)| *word == "in")?.1;
        } else if word.starts_with('(') {
            // Only redirections may follow a subshell; anything else makes
            // it the `(pattern)` of a `case` item, and the command follows.
            if skip_assignments(rest).is_empty() {
                return None;
            }
            text = rest;
        } else if LEADING_RESERVED.contains(&word) {
            text = rest;
        } else if word == "time" {
            text = match rest.strip_prefix("-p") {
                Some(after) if after.is_empty() || after.starts_with(is_blank_char) => {
                    after.trim_start_matches(is_blank_char)
                }
                _ => rest,
            };
        } else if word == "function" {
            // `function NAME [()] [{]`: what follows is the body.
            let (_, rest) = split_word(rest)?;
            text = rest.strip_prefix("()").unwrap_or(rest);
        } else if word.strip_suffix("()").is_some_and(is_name) {
            text = rest;
        } else if rest.starts_with("()") && is_name(word) {
            text = &rest[2..];
        } else {
            return Some(text);
        }
    }
}

/// `text` from its command name on: without the assignments
/// (`NAME=value`, `NAME+=value`, `NAME[i]=value`) and redirections (`>f`,
/// `2>&1`, `< in`, `<<EOF`) before it. Empty when nothing else is left.
pub(crate) fn skip_assignments(text: &str) -> &str {
    let mut text = text.trim_start_matches(is_blank_char);
    while let Some((word, rest)) = split_word(text) {
        if is_assignment(word) {
            text = rest;
        } else if let Some(operator_only) = redirection(word) {
            text = if operator_only { split_word(rest).map_or("", |(_, rest)| rest) } else { rest };
        } else {
            break;
        }
    }
    text
}

/// Whether `word` is a shell variable's name.
fn is_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `word` assigns a variable: a name, an optional `[index]`, then
/// `=` or `+=`.
fn is_assignment(word: &str) -> bool {
    let Some(equals) = word.find('=') else { return false };
    let target = word[..equals].strip_suffix('+').unwrap_or(&word[..equals]);
    let name = match target.find('[') {
        Some(open) if target.ends_with(']') => &target[..open],
        Some(_) => return false,
        None => target,
    };
    is_name(name)
}

/// Whether `word` is a redirection: `Some(true)` when it is only the
/// operator (its target is the next word), `Some(false)` when the target
/// is attached (`>out`, `2>&1`).
fn redirection(word: &str) -> Option<bool> {
    // An optional descriptor number or `{name}` before the operator.
    let operator = match word.strip_prefix('{') {
        Some(rest) => &rest[rest.find('}')? + 1..],
        None => word.trim_start_matches(|c: char| c.is_ascii_digit()),
    };
    let body = operator.trim_start_matches(['<', '>', '&', '|', '-']);
    let has_operator = operator.starts_with(['<', '>']) || operator.starts_with("&>");
    has_operator.then_some(body.is_empty())
}

fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n')
}

fn is_blank_char(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_that_can_open_a_construct_is_checked() {
        assert!(!could_be_incomplete("ls -la /tmp"));
        assert!(!could_be_incomplete("cargo test --workspace"));
        assert!(!could_be_incomplete("git commit -m \"it's done\" && echo 'ok'"));
        assert!(!could_be_incomplete("echo hi # don't"));
        assert!(could_be_incomplete("echo \"open"));
        assert!(could_be_incomplete("echo a &&"));
        assert!(could_be_incomplete("echo \"$(date\""));
        assert!(could_be_incomplete("echo 'x"));
        assert!(could_be_incomplete("cat << EOF"));
        assert!(could_be_incomplete("if true; then"));
        assert!(could_be_incomplete("for i in 1 2; do"));
        assert!(ends_with_continuation("echo a \\"));
        assert!(!ends_with_continuation("echo a \\\\"));
    }

    #[tokio::test]
    async fn incomplete_commands_are_recognised() {
        let bash = Path::new("bash");
        for text in [
            "echo 'abc",
            "echo \"abc",
            "if true; then",
            "cat << EOF",
            "cat << EOF\nline 1",
            "echo a &&",
            "echo a |",
            "f() {",
            "echo $(date",
            "for i in 1 2; do echo $i",
            "echo a \\",
        ] {
            assert!(is_incomplete(bash, text).await, "{text:?}");
        }
        for text in [
            "echo hi",
            "echo )",
            "fi",
            "cat << EOF\nline 1\nEOF",
            "if true; then echo y; fi",
            "echo 'a\nb'",
            "echo a \\\\",
        ] {
            assert!(!is_incomplete(bash, text).await, "{text:?}");
        }
    }
}

#[cfg(test)]
mod part_tests {
    use super::*;

    /// The parts' texts.
    fn texts(command: &str) -> Vec<&str> {
        command_parts(command).parts.iter().map(|part| part.text).collect()
    }

    /// Each case: a command and its parts, in order.
    fn check(cases: &[(&str, &[&str])]) {
        let mut failures = Vec::new();
        for &(command, expected) in cases {
            let actual = texts(command);
            if actual != expected {
                failures
                    .push(format!("{command:?}:\n  expected {expected:?}\n       got {actual:?}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn every_operator_splits() {
        check(&[
            ("cd demo && cargo build --release", &["cd demo", "cargo build --release"]),
            ("make || echo failed", &["make", "echo failed"]),
            ("a; b;c", &["a", "b", "c"]),
            ("cat x | python train.py", &["cat x", "python train.py"]),
            ("server & curl localhost", &["server", "curl localhost"]),
            ("a\nb\n\nc", &["a", "b", "c"]),
            ("make 2>&1 |& tee log", &["make 2>&1", "tee log"]),
            ("a;;b", &["a", "b"]),
            ("  a  ", &["a"]),
            ("", &[]),
            (";;&&||\n", &[]),
        ]);
    }

    #[test]
    fn quotes_escapes_comments_and_redirections_do_not_split() {
        check(&[
            ("echo 'a && cargo build'", &["echo 'a && cargo build'"]),
            ("echo \"a; b | c\"", &["echo \"a; b | c\""]),
            ("echo a\\;b \\&\\& c", &["echo a\\;b \\&\\& c"]),
            ("echo $'it\\'s; fine' && ls", &["echo $'it\\'s; fine'", "ls"]),
            ("ls # a comment; cargo build", &["ls"]),
            ("ls # a comment; cargo build\nmake", &["ls", "make"]),
            ("# only a comment", &[]),
            ("ls #", &["ls"]),
            ("echo a#b; ls", &["echo a#b", "ls"]),
            ("echo $#; ls", &["echo $#", "ls"]),
            ("make >&2; ls", &["make >&2", "ls"]),
            ("make &> log; ls", &["make &> log", "ls"]),
            ("make &>> log", &["make &>> log"]),
            ("make >| log <&3", &["make >| log <&3"]),
            ("echo ${x:-a;b} ${#y}", &["echo ${x:-a;b} ${#y}"]),
            ("echo $((1 | 2)); ls", &["echo $((1 | 2))", "ls"]),
            ("echo a \\\n && ls", &["echo a \\", "ls"]),
            ("[[ -f x || -d y ]] && ls", &["[[ -f x || -d y ]]", "ls"]),
            ("[[ $(a || b) == \"]]\" ]]; c", &["[[ $(a || b) == \"]]\" ]]", "a", "b", "c"]),
            ("[[x || y", &["[[x", "y"]),
        ]);
    }

    #[test]
    fn subshells_groups_and_substitutions_are_opened() {
        check(&[
            ("(cd x && make)", &["(cd x && make)", "cd x", "make"]),
            ("{ cd x; cargo build; }", &["{ cd x", "cargo build", "}"]),
            ("echo $(cargo build)", &["echo $(cargo build)", "cargo build"]),
            ("echo `make` done", &["echo `make` done", "make"]),
            ("echo \"$(make; ls)\"", &["echo \"$(make; ls)\"", "make", "ls"]),
            ("diff <(sort a) >(tee b)", &["diff <(sort a) >(tee b)", "sort a", "tee b"]),
            ("x=$(a $(b | c))", &["x=$(a $(b | c))", "a $(b | c)", "b", "c"]),
            ("echo ${x:-$(make)}", &["echo ${x:-$(make)}", "make"]),
            ("((i++)); ls", &["((i++))", "ls"]),
            ("arr=(one two; three) && ls", &["arr=(one two; three)", "ls"]),
            ("f() { make; }", &["f() { make", "}"]),
            ("echo \"`ls`\"", &["echo \"`ls`\"", "ls"]),
        ]);
        let parts = command_parts("a $(b $(c))").parts;
        let depths: Vec<_> = parts.iter().map(|p| (p.text, p.depth, p.start)).collect();
        assert_eq!(depths, [("a $(b $(c))", 0, 0), ("b $(c)", 1, 4), ("c", 2, 8)]);
    }

    #[test]
    fn here_documents_and_case_patterns() {
        check(&[
            ("cat <<EOF\ncargo build; make\nEOF\nls", &["cat <<EOF", "ls"]),
            ("cat <<'EOF' | wc\n$(make)\nEOF\nls", &["cat <<'EOF'", "wc", "ls"]),
            ("cat <<-END\n\tmake\n\tEND\nls", &["cat <<-END", "ls"]),
            ("cat <<A <<B\na\nA\nb\nB\nls", &["cat <<A <<B", "ls"]),
            ("cat <<EOF\nnever ends", &["cat <<EOF"]),
            ("cat <<< 'a; b'; ls", &["cat <<< 'a; b'", "ls"]),
            ("case $x in a) make;; b) ls;; esac", &["make", "ls", "esac"]),
        ]);
    }

    #[test]
    fn what_is_left_open_ends_with_the_text() {
        check(&[
            ("echo 'open; make", &["echo 'open; make"]),
            ("echo \"open; make", &["echo \"open; make"]),
            ("(make; ls", &["(make; ls", "make", "ls"]),
            ("echo $(make", &["echo $(make", "make"]),
            ("echo `make", &["echo `make", "make"]),
            ("a ) b; c", &["b", "c"]),
            ("echo \\", &["echo \\"]),
            ("$", &["$"]),
            ("$'", &["$'"]),
        ]);
    }

    #[test]
    fn nesting_and_size_are_bounded() {
        // Deep nesting: parts deeper than the bound stay in their parent.
        let deep = format!("{}make{}", "( ".repeat(100), " )".repeat(100));
        let parts = command_parts(&deep);
        let depths: Vec<_> = parts.parts.iter().map(|p| p.depth).collect();
        assert_eq!(depths, (0..=MAX_PART_DEPTH).collect::<Vec<_>>());
        assert!(parts.parts.iter().all(|p| p.text.starts_with('(') && p.text.contains("make")));
        // `((` opens arithmetic, which holds no parts.
        let arithmetic = format!("{}make{}", "(".repeat(100), ")".repeat(100));
        assert_eq!(texts(&arithmetic), [arithmetic.as_str()]);
        // Past the tracked constructs, the rest is one part's text.
        let unclosed = "$(".repeat(MAX_OPEN * 4);
        let parts = command_parts(&unclosed);
        assert!(parts.parts.len() <= MAX_PART_DEPTH + 1);
        // A megabyte of separators is no part at all; of commands, a count.
        assert_eq!(command_parts(&";".repeat(1 << 20)), Parts::default());
        let many = "a;".repeat(1 << 19);
        let parts = command_parts(&many);
        assert_eq!((parts.parts.len(), parts.omitted), (MAX_PARTS, (1 << 19) - MAX_PARTS));
        let here_docs = format!("cat {}\nmake\nEOF\nls", "<<EOF ".repeat(1 << 17));
        // The second body never ends, as in bash: `ls` is in it.
        assert_eq!(command_parts(&here_docs).parts.len(), 1);
        let quotes = "'".repeat(1 << 20);
        assert_eq!(command_parts(&quotes).parts.len(), 1, "one word of empty quotes");
        let mixed = "\"$(`'".repeat(1 << 16);
        let _ = command_parts(&mixed);
    }

    /// Random bytes and random mixes of bash's special characters: the scan
    /// never panics, and every part is a slice of the command at its
    /// `start`, without surrounding blanks.
    #[test]
    fn random_text_never_panics() {
        const ALPHABET: &[u8] = b"()`'\"$\\{};&|<>#=-\n\t ab\xc3\xa9";
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3000 {
            let len = (next() % 200) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if round % 3 == 0 { r as u8 } else { ALPHABET[(r as usize) % ALPHABET.len()] }
                })
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            let parts = command_parts(&text);
            for part in &parts.parts {
                assert_eq!(&text[part.start..part.start + part.text.len()], part.text, "{text:?}");
                assert_eq!(part.text.trim_matches(is_blank_char), part.text);
                assert!(!part.text.is_empty());
                let _ = command_of(part.text).map(skip_assignments);
            }
            let mut rest = text.as_ref();
            while let Some((word, after)) = split_word(rest) {
                assert!(!word.is_empty() && after.len() < rest.len(), "{text:?}");
                rest = after;
            }
        }
    }

    #[test]
    fn words_keep_their_quotes_and_substitutions() {
        let mut words = Vec::new();
        let mut rest = "  env 'a b' \"c \\\" d\" $(x y) `p q` ${v:-w z} e\\ f <(g h)  ";
        while let Some((word, after)) = split_word(rest) {
            words.push(word);
            rest = after;
        }
        assert_eq!(
            words,
            ["env", "'a b'", "\"c \\\" d\"", "$(x y)", "`p q`", "${v:-w z}", "e\\ f", "<(g h)"]
        );
        assert_eq!(split_word("   "), None);
    }

    #[test]
    fn the_command_of_a_part() {
        let cases: &[(&str, Option<&str>)] = &[
            ("make", Some("make")),
            ("if make; then", Some("make; then")),
            ("then cargo build", Some("cargo build")),
            ("elif ! test -f x", Some("test -f x")),
            ("else ls", Some("ls")),
            ("while sleep 1", Some("sleep 1")),
            ("until make", Some("make")),
            ("do make", Some("make")),
            ("{ make", Some("make")),
            ("time make", Some("make")),
            ("time -p make", Some("make")),
            ("time -pure", Some("-pure")),
            ("function f { make", Some("make")),
            ("function f() { make", Some("make")),
            ("f() { make", Some("make")),
            ("f () { make", Some("make")),
            ("FOO=1 make", Some("FOO=1 make")),
            ("fi", None),
            ("done > log", None),
            ("esac", None),
            ("}", None),
            ("for f in *.py", None),
            ("select x in a b", None),
            ("case $x in", None),
            ("case $x in (a) make", Some("make")),
            ("case $x", None),
            ("(cd x && make)", None),
            ("((i++))", None),
            ("(cd x) > log 2>&1", None),
            ("(build) cargo build", Some("cargo build")),
            ("[[ -f x ]]", None),
            ("[[x", Some("[[x")),
            ("", None),
            ("if", None),
        ];
        for &(part, command) in cases {
            assert_eq!(command_of(part), command, "{part:?}");
        }
    }

    #[test]
    fn assignments_and_redirections_before_the_command() {
        let cases = [
            ("FOO=1 make", "make"),
            ("A=1 B+=2 C[3]=x D='a b' E=$(date) make -j", "make -j"),
            (">log make", "make"),
            ("2>&1 make", "make"),
            ("> log 2> err < in make", "make"),
            ("{fd}>log make", "make"),
            ("<<<word cat", "cat"),
            ("FOO=1", ""),
            ("make FOO=1", "make FOO=1"),
            ("1a=2 make", "1a=2 make"),
            ("'A=1' make", "'A=1' make"),
            ("A[=1 make", "A[=1 make"),
            ("-n x", "-n x"),
        ];
        for (text, command) in cases {
            assert_eq!(skip_assignments(text), command, "{text:?}");
        }
    }
}
