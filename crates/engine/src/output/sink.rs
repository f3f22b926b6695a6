//! The one way output comes in: [`OutputSink`] takes every piece a command
//! prints, passes it through `pass` once, in order, and then drives the
//! command's log (the one stored copy) and the view a reply shows; it alone
//! decides when the log moves to its file (once the view was cut, or a line
//! an earlier reply cut ends). What is shown unkept (the unfinished line, a
//! full screen, a progress line) passes here too. [`IdleOutput`] is the sink
//! of what background jobs print between commands (a view, no log).
//!
//! Invariant: nothing else feeds a log or a view.
//!
//! Writers are the PTY reader thread (through the session's state lock) or a
//! `run`'s stream readers. It does not read logs back nor word replies.

use std::sync::Arc;

use super::log::CommandLog;
use super::pass::{Masking, Passed, pass, pass_shown};
use super::view::{
    CappedOutput, Continued, Shown, ShownLine, UnfinishedLine, show_unfinished_line,
};
use crate::mask::Secrets;

/// The one way a command's output comes in: every piece of text a command
/// prints passes through [`OutputSink::push`], once and in order, after
/// rendering (for `run`, after UTF-8 decoding) and before anything is kept,
/// shown, reported as progress or announced. It passes the text through
/// `output::pass`, which masks secrets (holding back a tail that may begin
/// one until the next piece decides it), then appends it to the command's
/// log (the only stored copy) and feeds the view a reply shows (head and
/// tail in memory). Nothing else writes either.
#[derive(Debug)]
pub(crate) struct OutputSink {
    log: Arc<CommandLog>,
    /// What the next reply shows.
    view: CappedOutput,
    /// Characters a view shows.
    cap: usize,
    /// The unfinished line the last reply showed, so that the next view
    /// shows only what is new of it.
    line_shown: Option<ShownLine>,
    /// The view must name the saved copy even if it was not cut: it holds
    /// the rest of a line an earlier reply had to cut.
    name_saved: bool,
    /// The stream's secrets and masking state.
    masking: Masking,
}

impl OutputSink {
    /// A sink writing into `log`, whose views show at most `cap`
    /// characters each, masking `secrets`.
    pub(crate) fn new(log: Arc<CommandLog>, cap: usize, secrets: Arc<Secrets>) -> OutputSink {
        OutputSink {
            log,
            view: CappedOutput::new(cap),
            cap,
            line_shown: None,
            name_saved: false,
            masking: Masking::new(secrets),
        }
    }

    /// Takes in the next piece of the command's output: the log keeps it,
    /// the view shows it (less the start of a line an earlier reply
    /// showed), and the log moves to its file when a reply will name it
    /// (`OutputSink::log_needs_file`).
    pub(crate) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let text = pass(&mut self.masking, text, false);
        self.keep(&text);
    }

    /// Keeps passed `text` in the log, shows it in the view, and moves the
    /// log to its file when it must be named.
    fn keep(&mut self, text: &Passed<'_>) {
        if text.as_str().is_empty() {
            return;
        }
        self.log.push(text);
        let was_cut = self.view.is_cut();
        let continued = self.view.push_continuing(&mut self.line_shown, text);
        if continued == Continued::CutLine {
            self.name_saved = true;
        }
        if self.log_needs_file(was_cut, continued) {
            self.log.keep_on_disk();
        }
    }

    /// Whether the log must move to its file now, though it may still fit
    /// in memory: a reply is about to name it, because the view was just
    /// cut (`was_cut` before this piece, cut now: its omission line names
    /// the file) or because this piece went on a line an earlier reply had
    /// to cut (that reply said the file would hold it). The sink decides
    /// this, not the view: the view only says what it shows.
    fn log_needs_file(&self, was_cut: bool, continued: Continued) -> bool {
        continued == Continued::CutLine || (!was_cut && self.view.is_cut())
    }

    /// The command ended with `exit_code`: what `pass` held back is
    /// released (a command's last output is never held), and the log is
    /// finished.
    pub(crate) fn finish(&mut self, exit_code: i32) {
        let rest = pass(&mut self.masking, "", true);
        self.keep(&rest);
        self.log.finish(exit_code);
    }

    /// What a reply shows of the line the command has not finished (the
    /// screen's current line, not committed yet, so not kept): only what is
    /// new since the last reply showed it, cut to `room` characters. It
    /// passes after what the stream holds back (the start of a line cut at
    /// the rows of a long line that scrolled off the screen), so that a
    /// secret across that cut is masked too.
    pub(crate) fn show_unfinished(&mut self, line: &str, room: usize) -> UnfinishedLine {
        let passed = pass_shown(&self.masking, line);
        let mut shown = show_unfinished_line(passed.as_str(), self.line_shown.as_ref(), room);
        shown.masked = passed.masked();
        self.line_shown = shown.shown.clone();
        shown
    }

    /// What a reply shows of a full-screen program: its `screen` as it is
    /// now (not kept; its lines are kept as they scroll off or when it
    /// ends), and the secrets masked in it. The next reply shows the
    /// current line whole.
    pub(crate) fn show_screen(&mut self, screen: String) -> (String, u64) {
        self.line_shown = None;
        let passed = pass(&mut Masking::new(Arc::clone(self.masking.secrets())), &screen, true);
        let masked = passed.masked();
        (passed.into_string(), masked)
    }

    /// The line a progress report shows: the screen's newest line while
    /// there is one (not committed yet), else the last line of the view.
    pub(crate) fn progress_line(&self, screen_line: String) -> String {
        if screen_line.is_empty() {
            self.view.last_line().to_owned()
        } else {
            pass_shown(&self.masking, &screen_line).into_string()
        }
    }

    /// What a reply shows of the output since the last one; the next view
    /// starts empty.
    pub(crate) fn take_shown(&mut self) -> Shown {
        let view = std::mem::replace(&mut self.view, CappedOutput::new(self.cap));
        let name_saved = std::mem::take(&mut self.name_saved);
        let saved = (name_saved || view.is_cut()).then(|| self.log.saved());
        view.into_shown(saved)
    }

    /// The log every piece goes to.
    pub(crate) fn log(&self) -> &Arc<CommandLog> {
        &self.log
    }
}

/// What a session's terminal printed while no command ran (background
/// jobs, say), kept for the next reply that announces it: the sink of idle
/// time. No command owns the text, so there is no log; the view keeps the
/// newest [`IDLE_OUTPUT_CAP`] characters or so. Text comes in only through
/// [`IdleOutput::push`], which passes it through `output::pass` as
/// [`OutputSink::push`] does a command's, masking the session's secrets.
#[derive(Debug)]
pub(crate) struct IdleOutput {
    /// What was printed since the last [`IdleOutput::take`], its newest
    /// part once it outgrew the cap.
    text: String,
    /// Secrets masked in `text`.
    masked: u64,
    masking: Masking,
}

/// Keep about this much of what is printed between commands (bytes; the
/// newest, cut at a character boundary).
pub(crate) const IDLE_OUTPUT_CAP: usize = 8_000;

impl IdleOutput {
    /// An empty idle output masking `secrets`.
    pub(crate) fn new(secrets: Arc<Secrets>) -> IdleOutput {
        IdleOutput { text: String::new(), masked: 0, masking: Masking::new(secrets) }
    }

    /// Takes in the next piece of what the terminal printed while no
    /// command ran. Bound: at most twice [`IDLE_OUTPUT_CAP`] bytes are held.
    pub(crate) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let passed = pass(&mut self.masking, text, false);
        self.append(&passed);
    }

    fn append(&mut self, passed: &Passed<'_>) {
        self.masked += passed.masked();
        self.text.push_str(passed.as_str());
        if self.text.len() > 2 * IDLE_OUTPUT_CAP {
            let cut = self.text.len() - IDLE_OUTPUT_CAP;
            let cut = (cut..self.text.len()).find(|&i| self.text.is_char_boundary(i)).unwrap_or(0);
            self.text.drain(..cut);
        }
    }

    /// Takes what was printed since the last time, and how many secrets
    /// were masked in it. What `pass` held back is released now, masked as
    /// far as it can be decided (background output comes in whole lines, so
    /// that is rarely anything).
    pub(crate) fn take(&mut self) -> (String, u64) {
        let rest = pass(&mut self.masking, "", true);
        self.append(&rest);
        (std::mem::take(&mut self.text), std::mem::take(&mut self.masked))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::output::log::MEMORY_LIMIT;
    use crate::output::pass::tests::plain;
    use crate::output::{
        OutputStore, SpillCut, SpillLimit, SpillLimits, SpillStore, StoreError, StoreLimits, Stream,
    };

    fn none() -> Arc<Secrets> {
        Arc::new(Secrets::none())
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "shellkeep-sink-{}-{name}-{}",
                std::process::id(),
                crate::private_fs::random_hex(4).expect("random")
            ));
            Scratch(dir)
        }

        fn store(&self, limits: SpillLimits, kept: StoreLimits) -> Arc<OutputStore> {
            OutputStore::new(SpillStore::new(self.0.clone(), "", limits, None), "t", kept)
        }

        /// The files in the directory and their sizes.
        fn files(&self) -> Vec<(PathBuf, u64)> {
            let mut files: Vec<_> = std::fs::read_dir(&self.0)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| (entry.path(), entry.metadata().expect("stat").len()))
                .collect();
            files.sort();
            files
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Every byte of a command's output is written once: a big output
    /// leaves exactly one file, of its size, however many replies showed
    /// parts of it; each cut reply names that file.
    #[test]
    fn a_big_output_is_stored_once_in_its_log() {
        let scratch = Scratch::new("once");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("seq"), 20, none());
        let full: String = (0..50_000).map(|i| format!("{i}\n")).collect();
        let mut shown = Vec::new();
        for (i, piece) in full.as_bytes().chunks(4096).enumerate() {
            sink.push(std::str::from_utf8(piece).expect("ascii"));
            if i % 20 == 19 {
                shown.push(sink.take_shown());
            }
        }
        shown.push(sink.take_shown());
        sink.finish(0);
        let files = scratch.files();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(files[0].1, full.len() as u64);
        assert_eq!(std::fs::read_to_string(&files[0].0).expect("read"), full);
        assert!(files[0].0.to_string_lossy().ends_with(".log"));
        for reply in &shown {
            assert!(reply.truncated);
            assert_eq!(reply.full_output_path.as_ref(), Some(&files[0].0));
            assert!(reply.text.contains(&format!("full output in {}", files[0].0.display())));
        }
    }

    /// A short output stays in memory: no file, nothing named.
    #[test]
    fn a_short_output_makes_no_file() {
        let scratch = Scratch::new("short");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("echo"), 100, none());
        sink.push("hello\n");
        let shown = sink.take_shown();
        assert_eq!(
            (shown.text.as_str(), shown.truncated, shown.full_output_path),
            ("hello\n", false, None)
        );
        assert_eq!(sink.log().read(0, 10).expect("read").text, "hello\n");
        assert!(!scratch.0.exists(), "nothing on disk");
    }

    /// A cut view moves the log to its file at once (even while it would
    /// fit in memory), so the reply can name it.
    #[test]
    fn a_cut_view_names_a_file_even_for_a_small_output() {
        let scratch = Scratch::new("small-cut");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("seq 100"), 10, none());
        let text: String = (0..100).map(|i| format!("{i}\n")).collect();
        sink.push(&text);
        let shown = sink.take_shown();
        let path = shown.full_output_path.expect("named");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).expect("stat").mode() & 0o777, 0o600);
    }

    /// Issue 7, 1.4, now counted once: the per-command limit covers a
    /// run's stdout and stderr together, each byte once; past it the file
    /// says where it was cut, and what is shown says so. The files hold at
    /// most the limit, less their cut lines.
    #[test]
    fn the_per_command_limit_counts_each_byte_once() {
        let scratch = Scratch::new("percmd");
        let limits = SpillLimits { per_command: 1000, per_server: 1 << 20 };
        let store = scratch.store(limits, StoreLimits::default());
        let logs = store.begin_run("both");
        let mut stdout = OutputSink::new(logs.stdout, 10, none());
        let mut stderr = OutputSink::new(logs.stderr, 10, none());
        stdout.push(&"a".repeat(600));
        stderr.push(&"é".repeat(150));
        stdout.push(&"b".repeat(600));
        let (out, err) = (stdout.take_shown(), stderr.take_shown());
        let saved_out =
            std::fs::read_to_string(out.full_output_path.as_ref().expect("path")).expect("read");
        let saved_err =
            std::fs::read_to_string(err.full_output_path.as_ref().expect("path")).expect("read");
        assert_eq!(err.full_output_cut, None);
        assert_eq!(saved_err, "é".repeat(150));
        // 600 + 300 bytes so far: the second push of stdout gets 100 more.
        let cut = out.full_output_cut.expect("cut");
        assert_eq!(cut, SpillCut { after_bytes: 700, limit: SpillLimit::PerCommand(1000) });
        let cut_line = "\n[shellkeep: the full output stops here, cut after 700 bytes: the limit \
                        per command of 1000 bytes for saved output was reached.]\n";
        assert_eq!(saved_out, format!("{}{}{cut_line}", "a".repeat(600), "b".repeat(100)));
        assert!(out.text.contains("cut after 700 bytes"), "{}", out.text);
        // Everything on disk: the limit's bytes of output, and the cut line.
        let on_disk: u64 = scratch.files().iter().map(|(_, size)| size).sum();
        assert_eq!(on_disk, 1000 + cut_line.len() as u64);
        // Another command has its own budget.
        let mut other = OutputSink::new(store.begin("other"), 10, none());
        other.push(&"c".repeat(500));
        assert_eq!(other.take_shown().full_output_cut, None);
    }

    #[test]
    fn the_per_server_limit_covers_every_command() {
        let scratch = Scratch::new("perserver");
        let limits = SpillLimits { per_command: 1000, per_server: 1500 };
        let store = scratch.store(limits, StoreLimits::default());
        let shown = |text: &str| {
            let mut sink = OutputSink::new(store.begin("x"), 10, none());
            sink.push(text);
            sink.take_shown()
        };
        assert_eq!(shown(&"a".repeat(1000)).full_output_cut, None);
        let second = shown(&"b".repeat(700));
        assert_eq!(
            second.full_output_cut,
            Some(SpillCut { after_bytes: 500, limit: SpillLimit::PerServer(1500) })
        );
        assert!(second.text.contains("the server's total limit of 1500 bytes"), "{}", second.text);
        let third = shown(&"c".repeat(100));
        let saved = std::fs::read_to_string(third.full_output_path.expect("path")).expect("read");
        assert!(saved.starts_with("\n[shellkeep: the full output stops here, cut after 0 bytes"));
    }

    /// When no file can be made, a cut reply says why and names none.
    #[test]
    fn an_output_that_cannot_be_saved_says_why() {
        let scratch = Scratch::new("unsaved");
        std::fs::write(&scratch.0, "a file, not a directory").expect("write");
        let spill = SpillStore::new(scratch.0.join("output"), "", SpillLimits::default(), None);
        let store = OutputStore::new(spill, "t", StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("x"), 10, none());
        sink.push(&"x".repeat(100));
        let shown = sink.take_shown();
        assert!(shown.truncated);
        assert_eq!(shown.full_output_path, None);
        assert!(shown.text.contains("could not be saved"), "{}", shown.text);
        let error = shown.full_output_error.expect("the error is given");
        assert!(error.contains("Not a directory"), "{error}");
    }

    /// The start of a line an earlier reply showed unfinished is kept in
    /// the log but not shown again; one the reply had to cut makes the
    /// reply where it ends name the saved copy, which holds it whole.
    #[test]
    fn a_line_shown_unfinished_is_kept_once_and_shown_once() {
        let scratch = Scratch::new("line");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("ask"), 100, none());
        assert_eq!(sink.show_unfinished("answer: ", 100).text, "answer: ");
        assert_eq!(sink.show_unfinished("answer: ", 100).text, "", "shown once");
        sink.push("answer: 42\nnext\n");
        let shown = sink.take_shown();
        assert_eq!((shown.text.as_str(), shown.full_output_path), ("42\nnext\n", None));
        assert_eq!(sink.log().read(0, 10).expect("read").text, "answer: 42\nnext\n");
        let long = "z".repeat(1000);
        assert_eq!(sink.show_unfinished(&long, 100).omitted, 900);
        sink.push(&format!("{long}\n"));
        let shown = sink.take_shown();
        assert_eq!((shown.text.as_str(), shown.truncated), ("\n", false));
        let path = shown.full_output_path.expect("named");
        assert_eq!(
            std::fs::read_to_string(path).expect("read"),
            format!("answer: 42\nnext\n{long}\n")
        );
    }

    /// A full-screen view resets the shown line; progress reads the
    /// screen's line, else the view's last line.
    #[test]
    fn what_is_shown_before_it_is_committed_passes_the_sink() {
        let scratch = Scratch::new("screen");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("top"), 100, none());
        sink.push("built 3 of 9\n\n");
        assert_eq!(sink.progress_line(String::new()), "built 3 of 9");
        assert_eq!(sink.progress_line("compiling x".into()), "compiling x");
        sink.show_unfinished("> ", 100);
        assert_eq!(sink.show_screen("full\nscreen".into()).0, "full\nscreen");
        assert_eq!(sink.show_unfinished("> ", 100).text, "> ", "shown whole again");
        assert_eq!(sink.log().read(0, 10).expect("read").text, "built 3 of 9\n\n");
    }

    /// A store of runs keeps each run's two streams under its number, and
    /// drops the oldest runs (both files) beyond its retention.
    #[test]
    fn runs_keep_two_streams_and_the_newest_runs() {
        let scratch = Scratch::new("runs");
        let store = scratch
            .store(SpillLimits::default(), StoreLimits { max_commands: 2, max_bytes: 1 << 30 });
        let mut paths = Vec::new();
        for n in 1..=3u64 {
            let logs = store.begin_run(&format!("run {n}"));
            assert_eq!(logs.number, n);
            logs.stdout.push(&plain(&format!("out {n}\n").repeat(MEMORY_LIMIT)));
            logs.stderr.push(&plain(&format!("err {n}\n").repeat(MEMORY_LIMIT)));
            logs.stdout.finish(0);
            logs.stderr.finish(0);
            paths.push([logs.stdout.path().expect("file"), logs.stderr.path().expect("file")]);
        }
        assert!(paths[2][0].to_string_lossy().ends_with(".stdout"), "{:?}", paths[2]);
        assert!(paths[2][1].to_string_lossy().ends_with(".stderr"), "{:?}", paths[2]);
        assert_eq!(store.numbers(), vec![2, 3]);
        assert!(paths[0].iter().all(|path| !path.exists()), "both files of run 1 are deleted");
        assert!(paths[1].iter().chain(&paths[2]).all(|path| path.exists()));
        let err = store.get_stream(Some(3), Stream::Stderr).expect("kept");
        assert_eq!(err.read(-1, 1).expect("read").text, "err 3\n");
        let out = store.get_stream(None, Stream::Stdout).expect("kept");
        assert_eq!(out.read(0, 1).expect("read").text, "out 3\n");
        let gone = store.get_stream(Some(1), Stream::Stderr).expect_err("dropped");
        assert!(matches!(gone, StoreError::NotKept { asked: 1, first: 2, last: 3 }), "{gone}");
        // A terminal command has one stream.
        store.begin("terminal");
        let none = store.get_stream(None, Stream::Stderr).expect_err("no stderr");
        assert!(matches!(none, StoreError::NoStream { number: 4, .. }), "{none}");
    }
}
