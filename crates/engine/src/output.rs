//! Capped output: the head and tail an agent is shown, and the complete
//! stream kept in a spill file.
//!
//! A [`CappedOutput`] takes a stream of (already masked) text. While the
//! stream is within its cap it stays in memory; once it grows past the cap
//! the whole stream so far, and everything after, goes to a spill file, and
//! memory keeps only the first and last halves of the cap. Memory stays
//! bounded however much a command prints, and nothing is lost. It does not
//! render terminal escapes or mask secrets: callers do that before.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// What an agent is shown of a stream, and where the rest is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The text to show: the whole stream, or head, notice and tail.
    pub text: String,
    /// Whether anything was left out of `text`.
    pub truncated: bool,
    /// Characters left out of `text`.
    pub omitted_chars: u64,
    /// Lines (newline characters) left out of `text`.
    pub omitted_lines: u64,
    /// The file that holds the complete stream, once it outgrew the cap.
    pub full_output_path: Option<PathBuf>,
}

/// A stream of text capped to a head and a tail, with the full stream
/// spilled to a file once it outgrows the cap.
#[derive(Debug)]
pub struct CappedOutput {
    /// Characters kept at the start, and at the end, of the stream.
    half_cap: usize,
    /// Where the complete stream goes once it outgrows the cap.
    spill_path: PathBuf,
    /// The first `half_cap` characters (the whole stream while it fits).
    head: String,
    head_chars: usize,
    /// Text after the head; trimmed from the front once it is much longer
    /// than `half_cap` characters, to keep memory bounded.
    tail: String,
    tail_chars: usize,
    total_chars: u64,
    total_lines: u64,
    /// Open once the stream outgrew the cap; holds the whole stream.
    spill: Option<BufWriter<File>>,
    /// Set if the spill file could not be written; reported, never fatal.
    spill_error: Option<String>,
}

impl CappedOutput {
    /// A new, empty stream that shows at most `cap` characters and spills to
    /// `spill_path` (created only when needed).
    pub fn new(cap: usize, spill_path: PathBuf) -> CappedOutput {
        CappedOutput {
            half_cap: cap.max(2) / 2,
            spill_path,
            head: String::new(),
            head_chars: 0,
            tail: String::new(),
            tail_chars: 0,
            total_chars: 0,
            total_lines: 0,
            spill: None,
            spill_error: None,
        }
    }

    /// Appends `text` to the stream.
    pub fn push(&mut self, mut text: &str) {
        if text.is_empty() {
            return;
        }
        let n_chars = count_chars(text);
        self.total_chars += n_chars as u64;
        self.total_lines += memchr_count(b'\n', text.as_bytes()) as u64;
        if self.spill.is_none() && self.total_chars > (2 * self.half_cap) as u64 {
            self.start_spill();
        }
        if let Some(spill) = &mut self.spill
            && let Err(err) = spill.write_all(text.as_bytes())
        {
            self.spill_error.get_or_insert_with(|| err.to_string());
        }
        if self.head_chars < self.half_cap {
            let room = self.half_cap - self.head_chars;
            let split = byte_index_of_char(text, room);
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

    /// Ends the stream: flushes the spill file and returns what to show.
    pub fn finish(mut self) -> Shown {
        if let Some(spill) = &mut self.spill
            && let Err(err) = spill.flush()
        {
            self.spill_error.get_or_insert_with(|| err.to_string());
        }
        if self.spill.is_none() {
            // Within the cap: everything is in memory, nothing was left out.
            let mut text = self.head;
            text.push_str(&self.tail);
            return Shown {
                text,
                truncated: false,
                omitted_chars: 0,
                omitted_lines: 0,
                full_output_path: None,
            };
        }
        self.trim_tail(self.half_cap);
        let shown_chars = (self.head_chars + self.tail_chars) as u64;
        let shown_lines = (memchr_count(b'\n', self.head.as_bytes())
            + memchr_count(b'\n', self.tail.as_bytes())) as u64;
        let omitted_chars = self.total_chars - shown_chars;
        let omitted_lines = self.total_lines - shown_lines;
        let full_output_path = match &self.spill_error {
            None => Some(self.spill_path.clone()),
            Some(_) => None,
        };
        let where_kept = match (&self.spill_error, &full_output_path) {
            (None, Some(path)) => format!("; full output in {}", path.display()),
            (Some(err), _) => format!("; the full output could not be saved: {err}"),
            _ => String::new(),
        };
        let mut text = self.head;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[... {omitted_chars} characters ({omitted_lines} lines) omitted{where_kept} ...]\n"
        ));
        text.push_str(&self.tail);
        Shown { text, truncated: true, omitted_chars, omitted_lines, full_output_path }
    }

    fn start_spill(&mut self) {
        let opened = File::create(&self.spill_path).and_then(|file| {
            let mut writer = BufWriter::with_capacity(1 << 16, file);
            // Everything pushed before now is still in memory: head + tail.
            writer.write_all(self.head.as_bytes())?;
            writer.write_all(self.tail.as_bytes())?;
            Ok(writer)
        });
        match opened {
            Ok(writer) => self.spill = Some(writer),
            Err(err) => {
                self.spill_error = Some(format!("{}: {err}", self.spill_path.display()));
                // Keep the cap in force even without a file, by pretending
                // to spill into nothing.
                self.spill = Some(BufWriter::new(
                    File::options().write(true).open("/dev/null").expect("/dev/null is writable"),
                ));
            }
        }
    }

    /// The last non-blank line pushed so far (for progress messages).
    pub fn last_line(&self) -> &str {
        let text = if self.tail.trim().is_empty() { &self.head } else { &self.tail };
        text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("")
    }

    /// Drops characters from the front of the tail until at most `keep`
    /// remain.
    fn trim_tail(&mut self, keep: usize) {
        if self.tail_chars <= keep {
            return;
        }
        let drop = self.tail_chars - keep;
        let split = byte_index_of_char(&self.tail, drop);
        self.tail.drain(..split);
        self.tail_chars = keep;
    }
}

/// Number of characters in `text`, counted fast on its bytes.
fn count_chars(text: &str) -> usize {
    text.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

fn memchr_count(needle: u8, haystack: &[u8]) -> usize {
    haystack.iter().filter(|&&b| b == needle).count()
}

/// Byte index of the `n`th character of `text` (its length if shorter).
fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spill_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("shellkeep-output-test-{}-{name}", std::process::id()))
    }

    #[test]
    fn short_streams_are_shown_whole() {
        let mut out = CappedOutput::new(100, spill_path("short"));
        out.push("hello ");
        out.push("world\n");
        let shown = out.finish();
        assert_eq!(shown.text, "hello world\n");
        assert!(!shown.truncated);
        assert_eq!(shown.full_output_path, None);
    }

    #[test]
    fn long_streams_keep_head_and_tail_and_spill_everything() {
        let path = spill_path("long");
        let mut out = CappedOutput::new(20, path.clone());
        let full: String = (0..1000).map(|i| format!("{i}\n")).collect();
        // Split into odd pieces, including multi-byte characters.
        for piece in full.as_bytes().chunks(7) {
            out.push(std::str::from_utf8(piece).expect("ascii"));
        }
        out.push("é€\n");
        let shown = out.finish();
        assert!(shown.truncated);
        assert!(shown.text.starts_with("0\n1\n2\n3\n4\n"), "{}", shown.text);
        assert!(shown.text.ends_with("999\né€\n"), "{}", shown.text);
        let expected_total = full.chars().count() as u64 + 3;
        assert_eq!(shown.omitted_chars, expected_total - 20);
        let saved = std::fs::read_to_string(shown.full_output_path.as_ref().expect("spilled"))
            .expect("spill file");
        assert_eq!(saved, format!("{full}é€\n"));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        let mut out = CappedOutput::new(10, spill_path("exact"));
        out.push("0123456789");
        let shown = out.finish();
        assert_eq!((shown.text.as_str(), shown.truncated), ("0123456789", false));
    }
}
