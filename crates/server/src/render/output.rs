//! The words of the `output` tool's replies: a page of a command's output
//! (text and structured content), why a read could not be served, the
//! arguments of the `output` call a cut `run` reply suggests, and where a
//! full-output file was cut (`SpillCut`, which terminal and `run` replies
//! name too).
//!
//! Invariant: every word of an `output` reply is chosen here; the engine
//! hands over data (`LogPage`, `StoreError`, `SpillCut`).
//!
//! It does not read logs (`tools/output.rs` does) nor check arguments
//! (`args.rs`).

use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::{
    LogPage, MAX_READ_LINES, Shown, SpillCut, SpillLimit, StoreError, Stream, json_chars,
};

use super::Blocks;
use rmcp::schemars;

/// Whose output a page of the `output` tool is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A terminal command of this session.
    Session(&'a str),
    /// A stream of a `run` command.
    Run(Stream),
}

/// Structured result of the `output` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutputPage {
    /// The session, for a terminal command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The `run` command's number, for a `run` output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// The stream read (`stdout` or `stderr`), for a `run` output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<&'static str>,
    /// The command's number in the session (a `run` output: the run's).
    pub command: u64,
    /// The command (cut to 200 characters); the text names it on the
    /// first page only.
    pub command_text: String,
    /// The number of the first line returned (from 0).
    pub first_line: u64,
    /// How many lines were returned.
    pub line_count: u64,
    /// Lines of output so far.
    pub total_lines: u64,
    /// The offset to read next (equal to `total_lines` at the end, and when
    /// the rest is unavailable).
    pub next_offset: u64,
    /// Whether the command is still running (more lines may come).
    pub running: bool,
    /// The exit code, once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the page stopped at 30,000 characters (counted as JSON
    /// writes them) before its line limit.
    pub cut_at_cap: bool,
    /// When the saved output stopped at a size limit: where and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_until: Option<String>,
    /// Bytes printed past that limit, never saved (not in `total_lines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_not_saved: Option<u64>,
    /// Lines that start past that limit, never saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_not_saved: Option<u64>,
    /// When the output could not be saved from some line on (a full disk,
    /// a directory that cannot be written): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save_error: Option<String>,
    /// The first line that was counted but not saved, when this page
    /// reached it: lines from here to `total_lines` cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_from: Option<u64>,
    /// The lines returned, each with its newline. Always last.
    pub lines: String,
}

/// The arguments of an `output` call that reads part of a `run` stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct OutputCall {
    /// The run's number.
    pub run: u64,
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The first line to read.
    pub offset: u64,
    /// How many lines.
    pub limit: u64,
}

impl OutputCall {
    /// The call for the lines `shown` (of `stream` of run `run`) left out,
    /// when it left any out.
    pub(super) fn for_cut(run: u64, stream: Stream, shown: &Shown) -> Option<OutputCall> {
        if !shown.truncated && shown.full_output_cut.is_none() {
            return None;
        }
        Some(OutputCall {
            run,
            stream: stream.as_str(),
            offset: shown.lines_before_omission,
            limit: (shown.omitted_lines + 1).min(MAX_READ_LINES),
        })
    }

    /// As the arguments are written in a reply's text: `stream` only for
    /// stderr (stdout is the default).
    pub(super) fn arguments(&self) -> String {
        let stream = match self.stream {
            "stdout" => String::new(),
            other => format!(", \"stream\": {other:?}"),
        };
        format!(
            "{{\"run\": {}{stream}, \"offset\": {}, \"limit\": {}}}",
            self.run, self.offset, self.limit
        )
    }
}

/// Where a full-output file was cut and which limit cut it, as a reply
/// says it: `cut after 700 bytes: the limit per command of 100 MiB for
/// saved output was reached`.
pub(crate) fn spill_cut(cut: &SpillCut) -> String {
    let (what, bytes) = match cut.limit {
        SpillLimit::PerCommand(bytes) => ("the limit per command", bytes),
        SpillLimit::PerServer(bytes) => ("the server's total limit", bytes),
    };
    format!(
        "cut after {} bytes: {what} of {} for saved output was reached",
        cut.after_bytes,
        limit_size(bytes)
    )
}

/// A byte limit in the largest binary unit that divides it (`100 MiB`,
/// `1000 bytes`): the unit a person wrote it in.
fn limit_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Why a read of a session's command output could not be served, with
/// where to find the numbers to read.
pub(crate) fn session_output_error(err: &StoreError) -> String {
    format!(
        "{}. List the sessions with the sessions tool; a cut reply names the command number to \
         read.",
        store_error(err)
    )
}

/// Why a read of run `number`'s output could not be served.
pub(crate) fn run_output_error(number: u64, err: &StoreError) -> String {
    match err {
        StoreError::Empty => format!(
            "no run has been kept yet, so there is no run {number}: a cut `run` reply names the \
             run number to read"
        ),
        StoreError::NotKept { asked, first, last } => format!(
            "run {asked} is not kept: the server keeps runs {first} to {last} (the oldest go \
             first)"
        ),
        other => store_error(other),
    }
}

/// Why a read could not be served, in a session's terms.
fn store_error(err: &StoreError) -> String {
    match err {
        StoreError::Empty => "no command has run in this session yet".to_owned(),
        StoreError::NotKept { asked, first, last } => {
            format!("command {asked} is not kept: the session keeps commands {first} to {last}")
        }
        StoreError::NoStream { number, stream } => {
            format!("command {number} has no separate {}", stream.as_str())
        }
        StoreError::Unreadable { number, path, error } => format!(
            "the output of command {number} could not be read from {}: {error}",
            path.display()
        ),
    }
}

/// Cuts `page` to whole lines within `budget` characters as JSON writes
/// them (a page of quotes or control characters takes up to six times its
/// length there), and says so with `cut_at_cap`; a first line longer than
/// that alone is cut inside. The next offset then moves past the lines
/// kept.
pub(crate) fn fit_page(page: &mut LogPage, budget: usize) {
    if json_chars(&page.text) <= budget {
        return;
    }
    let (mut weight, mut end, mut lines) = (0, 0, 0);
    for line in page.text.split_inclusive('\n') {
        let size = json_chars(line);
        if weight + size > budget {
            if lines == 0 {
                let mut inside = 0;
                for (i, c) in line.char_indices() {
                    weight += json_chars(c.encode_utf8(&mut [0; 4]));
                    if weight > budget {
                        break;
                    }
                    inside = i + c.len_utf8();
                }
                (end, lines) = (inside, 1);
            }
            break;
        }
        (weight, end, lines) = (weight + size, end + line.len(), lines + 1);
    }
    page.text.truncate(end);
    page.lines = lines;
    page.cut_at_cap = true;
}

/// Where a page leaves its reader: the line to read next, and the first
/// line that can never be read, when the page reached it.
struct Onward {
    /// The offset to read next.
    next: u64,
    /// The first line counted but not saved, when the page reached it.
    unavailable_from: Option<u64>,
}

impl Onward {
    /// Where `page` leaves its reader. Lines past what was saved can never
    /// be read: the next offset moves past them, so a reader following it
    /// never asks for them again.
    fn of(page: &LogPage) -> Onward {
        let end = page.first_line + page.lines;
        let unavailable_from = page.rest_unavailable.then_some(end);
        let next = if page.rest_unavailable { page.total_lines } else { end };
        Onward { next, unavailable_from }
    }
}

/// The text and structured content of a page of a command's output.
pub(crate) fn output_page(source: &Source<'_>, page: &LogPage) -> (Blocks, OutputPage) {
    let onward = Onward::of(page);
    let mut text = Blocks::default();
    text.output(&page.text);
    let cut = if page.cut_at_cap { " The page stopped at 30,000 characters." } else { "" };
    text.notice(&format!(
        "[{}: {} of {}; {}.{}{cut}{}]",
        whose(source, page),
        page_range(page),
        page.total_lines,
        page_state(page),
        read_on(page, &onward),
        saved_note(page, &onward).as_deref().unwrap_or("")
    ));
    (text, page_structured(source, page, &onward))
}

/// Whose page it is: `Command 3 ("make") in session "default"` or `Run 2,
/// stderr`; the command's text on its first page only (a reader paging
/// through it knows it by then; the structured content always has it).
fn whose(source: &Source<'_>, page: &LogPage) -> String {
    let command =
        if page.first_line == 0 { format!(" ({:?})", page.command) } else { String::new() };
    match source {
        Source::Session(session) => {
            format!("Command {}{command} in session {session:?}", page.number)
        }
        Source::Run(stream) => format!("Run {}{command}, {}", page.number, stream.as_str()),
    }
}

/// The lines the page holds: `lines 0-199`, or `no lines from line 12`.
fn page_range(page: &LogPage) -> String {
    if page.lines == 0 {
        format!("no lines from line {}", page.first_line)
    } else {
        format!("lines {}-{}", page.first_line, page.first_line + page.lines - 1)
    }
}

/// Whether the command still runs, or how it ended.
fn page_state(page: &LogPage) -> String {
    match (page.running, page.exit_code) {
        (true, _) => "still running".to_owned(),
        (false, Some(code)) => format!("ended with exit code {code}"),
        (false, None) => "ended".to_owned(),
    }
}

/// What to read next: the lines that can never be read (and why), the next
/// offset, or where new lines of a running command will be.
fn read_on(page: &LogPage, onward: &Onward) -> String {
    let next = onward.next;
    let Some(from) = onward.unavailable_from else {
        return if next < page.total_lines {
            format!(" Next: offset {next}.")
        } else if page.running {
            format!(" Read again from offset {next} for new lines.")
        } else {
            String::new()
        };
    };
    let why_unsaved = match (&page.save_error, page.saved_until) {
        (Some(error), _) => format!("the output could not be saved: {error}"),
        (None, Some(cut)) => format!("the saved output stops: {}", spill_cut(&cut)),
        (None, None) => "they were not saved".to_owned(),
    };
    let rest = format!(
        " Lines {from}-{} cannot be read ({why_unsaved}).",
        page.total_lines.saturating_sub(1)
    );
    if page.running { format!("{rest} Read again from offset {next} for new lines.") } else { rest }
}

/// What the page says of a saved output that stops before the end, when
/// the page did not reach that end (then [`read_on`] says it).
fn saved_note(page: &LogPage, onward: &Onward) -> Option<String> {
    if onward.unavailable_from.is_some() {
        return None;
    }
    if let Some(error) = &page.save_error {
        return Some(format!(" Part of the output could not be saved: {error}."));
    }
    let cut = spill_cut(&page.saved_until?);
    Some(match page.not_saved {
        Some(rest) => format!(
            " The saved output stops: {cut}; the {} bytes ({} lines) printed after it were not \
             saved.",
            rest.bytes, rest.lines
        ),
        None => format!(" The saved output stops: {cut}."),
    })
}

/// The structured content of `page`.
fn page_structured(source: &Source<'_>, page: &LogPage, onward: &Onward) -> OutputPage {
    OutputPage {
        session: match source {
            Source::Session(session) => Some((*session).to_owned()),
            Source::Run(_) => None,
        },
        run: matches!(source, Source::Run(_)).then_some(page.number),
        stream: match source {
            Source::Run(stream) => Some(stream.as_str()),
            Source::Session(_) => None,
        },
        command: page.number,
        command_text: page.command.clone(),
        first_line: page.first_line,
        line_count: page.lines,
        total_lines: page.total_lines,
        next_offset: onward.next,
        running: page.running,
        exit_code: page.exit_code,
        cut_at_cap: page.cut_at_cap,
        saved_until: page.saved_until.as_ref().map(spill_cut),
        bytes_not_saved: page.not_saved.map(|rest| rest.bytes),
        lines_not_saved: page.not_saved.map(|rest| rest.lines),
        save_error: page.save_error.clone(),
        unavailable_from: onward.unavailable_from,
        lines: page.text.clone(),
    }
}

#[cfg(test)]
mod tests {
    //! Snapshot tests of every `output` reply kind: the text blocks
    //! (separated by a line of `=`) and the structured content an agent
    //! reads. `UPDATE_EXPECT=1 cargo test -p shellkeep --bin shellkeep`
    //! rewrites them after a deliberate change.

    use std::path::PathBuf;

    use expect_test::{Expect, expect};
    use shellkeep_engine::NotSaved;

    use super::*;

    /// Lines `first ..` of `make`, command 3, of `total` lines, ended with 0.
    fn page(first: u64, lines: u64, total: u64) -> LogPage {
        LogPage {
            number: 3,
            command: "make".to_owned(),
            text: (first..first + lines).map(|i| format!("line {i}\n")).collect(),
            first_line: first,
            lines,
            total_lines: total,
            running: false,
            exit_code: Some(0),
            cut_at_cap: false,
            saved_until: None,
            not_saved: None,
            save_error: None,
            rest_unavailable: false,
            path: None,
        }
    }

    /// The limit per command cut the file after 700 bytes.
    const CUT: SpillCut = SpillCut { after_bytes: 700, limit: SpillLimit::PerCommand(100 << 20) };

    /// Checks the text and structured content of `page` read from `source`.
    fn check(source: Source<'_>, page: &LogPage, expected: Expect) {
        let (blocks, structured) = output_page(&source, page);
        let text = blocks.into_texts().join("\n=====\n");
        let json = serde_json::to_string_pretty(&structured).expect("serializable");
        expected.assert_eq(&format!("{text}\n-----\n{json}\n"));
    }

    #[test]
    fn a_first_page_with_more_to_read() {
        check(
            Source::Session("default"),
            &page(0, 2, 10),
            expect![[r#"
                line 0
                line 1
                [Command 3 ("make") in session "default": lines 0-1 of 10; ended with exit code 0. Next: offset 2.]
                -----
                {
                  "session": "default",
                  "command": 3,
                  "command_text": "make",
                  "first_line": 0,
                  "line_count": 2,
                  "total_lines": 10,
                  "next_offset": 2,
                  "running": false,
                  "exit_code": 0,
                  "cut_at_cap": false,
                  "lines": "line 0\nline 1\n"
                }
            "#]],
        );
    }

    #[test]
    fn the_last_page_of_a_finished_command() {
        check(
            Source::Session("build"),
            &page(8, 2, 10),
            expect![[r#"
                line 8
                line 9
                [Command 3 in session "build": lines 8-9 of 10; ended with exit code 0.]
                -----
                {
                  "session": "build",
                  "command": 3,
                  "command_text": "make",
                  "first_line": 8,
                  "line_count": 2,
                  "total_lines": 10,
                  "next_offset": 10,
                  "running": false,
                  "exit_code": 0,
                  "cut_at_cap": false,
                  "lines": "line 8\nline 9\n"
                }
            "#]],
        );
    }

    #[test]
    fn the_end_of_a_running_command() {
        let running = LogPage { running: true, exit_code: None, ..page(8, 2, 10) };
        check(
            Source::Session("default"),
            &running,
            expect![[r#"
            line 8
            line 9
            [Command 3 in session "default": lines 8-9 of 10; still running. Read again from offset 10 for new lines.]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 8,
              "line_count": 2,
              "total_lines": 10,
              "next_offset": 10,
              "running": true,
              "cut_at_cap": false,
              "lines": "line 8\nline 9\n"
            }
        "#]],
        );
    }

    #[test]
    fn a_page_cut_at_its_character_cap() {
        let mut cut = page(0, 3, 3);
        fit_page(&mut cut, 14);
        check(
            Source::Session("default"),
            &cut,
            expect![[r#"
            line 0
            [Command 3 ("make") in session "default": lines 0-0 of 3; ended with exit code 0. Next: offset 1. The page stopped at 30,000 characters.]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 0,
              "line_count": 1,
              "total_lines": 3,
              "next_offset": 1,
              "running": false,
              "exit_code": 0,
              "cut_at_cap": true,
              "lines": "line 0\n"
            }
        "#]],
        );
    }

    #[test]
    fn an_offset_past_the_end() {
        check(
            Source::Session("default"),
            &page(10, 0, 10),
            expect![[r#"
            [Command 3 in session "default": no lines from line 10 of 10; ended with exit code 0.]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 10,
              "line_count": 0,
              "total_lines": 10,
              "next_offset": 10,
              "running": false,
              "exit_code": 0,
              "cut_at_cap": false,
              "lines": ""
            }
        "#]],
        );
    }

    #[test]
    fn a_run_streams_page() {
        check(
            Source::Run(Stream::Stderr),
            &LogPage { number: 2, ..page(0, 2, 2) },
            expect![[r#"
                line 0
                line 1
                [Run 2 ("make"), stderr: lines 0-1 of 2; ended with exit code 0.]
                -----
                {
                  "run": 2,
                  "stream": "stderr",
                  "command": 2,
                  "command_text": "make",
                  "first_line": 0,
                  "line_count": 2,
                  "total_lines": 2,
                  "next_offset": 2,
                  "running": false,
                  "exit_code": 0,
                  "cut_at_cap": false,
                  "lines": "line 0\nline 1\n"
                }
            "#]],
        );
    }

    #[test]
    fn a_page_before_a_size_limit_cut_the_saved_output() {
        let limited = LogPage {
            saved_until: Some(CUT),
            not_saved: Some(NotSaved { bytes: 300, lines: 4 }),
            ..page(0, 2, 10)
        };
        check(
            Source::Session("default"),
            &limited,
            expect![[r#"
            line 0
            line 1
            [Command 3 ("make") in session "default": lines 0-1 of 10; ended with exit code 0. Next: offset 2. The saved output stops: cut after 700 bytes: the limit per command of 100 MiB for saved output was reached; the 300 bytes (4 lines) printed after it were not saved.]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 0,
              "line_count": 2,
              "total_lines": 10,
              "next_offset": 2,
              "running": false,
              "exit_code": 0,
              "cut_at_cap": false,
              "saved_until": "cut after 700 bytes: the limit per command of 100 MiB for saved output was reached",
              "bytes_not_saved": 300,
              "lines_not_saved": 4,
              "lines": "line 0\nline 1\n"
            }
        "#]],
        );
    }

    #[test]
    fn a_page_that_reaches_what_was_never_saved() {
        let unsaved = LogPage {
            save_error: Some("No space left on device (os error 28)".to_owned()),
            rest_unavailable: true,
            running: true,
            exit_code: None,
            ..page(8, 2, 15)
        };
        check(
            Source::Session("default"),
            &unsaved,
            expect![[r#"
            line 8
            line 9
            [Command 3 in session "default": lines 8-9 of 15; still running. Lines 10-14 cannot be read (the output could not be saved: No space left on device (os error 28)). Read again from offset 15 for new lines.]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 8,
              "line_count": 2,
              "total_lines": 15,
              "next_offset": 15,
              "running": true,
              "cut_at_cap": false,
              "save_error": "No space left on device (os error 28)",
              "unavailable_from": 10,
              "lines": "line 8\nline 9\n"
            }
        "#]],
        );
        let limited = LogPage { saved_until: Some(CUT), rest_unavailable: true, ..page(8, 2, 15) };
        check(
            Source::Session("default"),
            &limited,
            expect![[r#"
            line 8
            line 9
            [Command 3 in session "default": lines 8-9 of 15; ended with exit code 0. Lines 10-14 cannot be read (the saved output stops: cut after 700 bytes: the limit per command of 100 MiB for saved output was reached).]
            -----
            {
              "session": "default",
              "command": 3,
              "command_text": "make",
              "first_line": 8,
              "line_count": 2,
              "total_lines": 15,
              "next_offset": 15,
              "running": false,
              "exit_code": 0,
              "cut_at_cap": false,
              "saved_until": "cut after 700 bytes: the limit per command of 100 MiB for saved output was reached",
              "unavailable_from": 10,
              "lines": "line 8\nline 9\n"
            }
        "#]],
        );
    }

    #[test]
    fn reads_that_cannot_be_served() {
        let unreadable = StoreError::Unreadable {
            number: 3,
            path: PathBuf::from("/tmp/out/shellkeep-1-abcdef-default-cmd3-0a0b.log"),
            error: "No such file or directory (os error 2)".to_owned(),
        };
        let errors = [
            session_output_error(&StoreError::Empty),
            session_output_error(&StoreError::NotKept { asked: 1, first: 4, last: 9 }),
            session_output_error(&unreadable),
            run_output_error(5, &StoreError::Empty),
            run_output_error(1, &StoreError::NotKept { asked: 1, first: 2, last: 3 }),
            run_output_error(2, &StoreError::NoStream { number: 2, stream: Stream::Stderr }),
        ];
        expect![[r#"
            no command has run in this session yet. List the sessions with the sessions tool; a cut reply names the command number to read.
            command 1 is not kept: the session keeps commands 4 to 9. List the sessions with the sessions tool; a cut reply names the command number to read.
            the output of command 3 could not be read from /tmp/out/shellkeep-1-abcdef-default-cmd3-0a0b.log: No such file or directory (os error 2). List the sessions with the sessions tool; a cut reply names the command number to read.
            no run has been kept yet, so there is no run 5: a cut `run` reply names the run number to read
            run 1 is not kept: the server keeps runs 2 to 3 (the oldest go first)
            command 2 has no separate stderr"#]].assert_eq(&errors.join("\n"));
    }

    #[test]
    fn the_output_call_a_cut_run_names() {
        let cut = Shown {
            text: "head\n[... 5 characters (3 lines) omitted ...]\ntail\n".to_owned(),
            truncated: true,
            omitted_chars: 5,
            omitted_lines: 3,
            lines_before_omission: 1,
            ..Shown::empty()
        };
        let calls = [Stream::Stdout, Stream::Stderr]
            .map(|stream| OutputCall::for_cut(7, stream, &cut).expect("cut"));
        let whole = OutputCall::for_cut(7, Stream::Stdout, &Shown::empty());
        let text = calls.iter().map(OutputCall::arguments).collect::<Vec<_>>().join("\n");
        let json = serde_json::to_string_pretty(&calls).expect("serializable");
        expect![[r#"
            {"run": 7, "offset": 1, "limit": 4}
            {"run": 7, "stream": "stderr", "offset": 1, "limit": 4}
            -----
            [
              {
                "run": 7,
                "stream": "stdout",
                "offset": 1,
                "limit": 4
              },
              {
                "run": 7,
                "stream": "stderr",
                "offset": 1,
                "limit": 4
              }
            ]
            -----
            None
        "#]]
        .assert_eq(&format!("{text}\n-----\n{json}\n-----\n{whole:?}\n"));
    }

    #[test]
    fn where_a_full_output_file_was_cut() {
        let server = SpillCut { after_bytes: 0, limit: SpillLimit::PerServer(1500) };
        let words = [spill_cut(&CUT), spill_cut(&server)];
        expect![[r#"
            cut after 700 bytes: the limit per command of 100 MiB for saved output was reached
            cut after 0 bytes: the server's total limit of 1500 bytes for saved output was reached"#]].assert_eq(&words.join("\n"));
    }
}
