//! What a viewer must not get of the raw stream, and what it gets
//! instead: the shell integration's marker sequences (OSC 6973, which carry
//! the session's nonce: a viewer that learnt it could forge a command's
//! end) are taken out wherever the engine leaves one, and an agent's
//! command (which the engine names in a `Tap::Command`, the echo of the
//! line that runs it being kept from the taps) is shown as a person would
//! have typed it at a prompt (`$ make test`).
//!
//! A pure filter over bytes, fed a piece at a time: it holds back at most
//! the start of a marker (7 bytes). It does not mask: the caller masks
//! what it returns.

/// The start of a marker sequence.
const MARKER_START: &[u8] = b"\x1b]6973;";

/// The most bytes of one marker dropped; past that the sequence is not
/// one of ours and the rest is passed on.
const MAX_MARKER: usize = 4096;

/// Where the filter is in the stream.
#[derive(Debug)]
enum State {
    /// Passing bytes on.
    Plain,
    /// Inside a marker sequence, dropped so far: `dropped` bytes; `escape`
    /// when the last byte was ESC (the start of its `ESC \` end).
    Marker { dropped: usize, escape: bool },
}

/// The filter of one viewer's stream.
#[derive(Debug)]
pub struct Cleaner {
    state: State,
    /// A possible start of a marker, held back.
    marker: Vec<u8>,
}

impl Default for Cleaner {
    fn default() -> Self {
        Cleaner::new()
    }
}

impl Cleaner {
    /// A filter at the start of a stream.
    pub fn new() -> Cleaner {
        Cleaner { state: State::Plain, marker: Vec::new() }
    }

    /// Takes the next `bytes` of output; returns what can be shown now.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        for &byte in bytes {
            self.byte(byte, &mut out);
        }
        out
    }

    /// Everything held back: the stream ends (or skips) here.
    pub fn finish(&mut self) -> Vec<u8> {
        self.state = State::Plain;
        std::mem::take(&mut self.marker)
    }

    fn byte(&mut self, byte: u8, out: &mut Vec<u8>) {
        if let State::Marker { dropped, escape } = &mut self.state {
            *dropped += 1;
            let ends = byte == 0x07 || (*escape && byte == b'\\');
            *escape = byte == 0x1b;
            if ends || *dropped > MAX_MARKER {
                self.state = State::Plain;
            }
            return;
        }
        if self.marker.is_empty() && byte != 0x1b {
            out.push(byte);
            return;
        }
        self.marker.push(byte);
        if self.marker.as_slice() == MARKER_START {
            self.marker.clear();
            self.state = State::Marker { dropped: 0, escape: false };
        } else if !MARKER_START.starts_with(&self.marker) {
            // Not ours; its last byte may start the next sequence.
            let mut held = std::mem::take(&mut self.marker);
            if held.last() == Some(&0x1b) {
                held.pop();
                self.marker.push(0x1b);
            }
            out.append(&mut held);
        }
    }
}

/// The agent's command as a person would have typed it at a prompt: `$ `,
/// its lines after the first with `> `.
pub fn command_line(command: &str) -> String {
    let mut text = String::from("$ ");
    text.push_str(&command.replace('\n', "\n> "));
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` whole, then split at every byte; both give the same.
    fn clean(stream: &[u8]) -> String {
        let run = |split: usize| {
            let mut cleaner = Cleaner::new();
            let mut out = Vec::new();
            for piece in stream.chunks(split.max(1)) {
                out.extend(cleaner.push(piece));
            }
            out.extend(cleaner.finish());
            String::from_utf8_lossy(&out).into_owned()
        };
        let whole = run(stream.len());
        for split in 1..stream.len().min(40) {
            assert_eq!(run(split), whole, "split every {split} bytes");
        }
        whole
    }

    #[test]
    fn markers_are_taken_out_wherever_they_are() {
        let stream = b"a\x1b]6973;0a1b2c;E;0;12\x07\x07b\x1b]6973;0a1b;S;1;1\x1b\\c\n";
        assert_eq!(clean(stream), "a\x07bc\n");
        // Other sequences pass, the start of one that is not ours too.
        let other = b"\x1b]0;title\x07\x1b[1mbold\x1b[0m\x1b]697x\x1b\x1b]6973;n;P\x07";
        assert_eq!(clean(other), "\x1b]0;title\x07\x1b[1mbold\x1b[0m\x1b]697x\x1b");
        // A marker without its end stops being dropped after a bound.
        let mut long = b"\x1b]6973;".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_MARKER + 10));
        assert_eq!(clean(&long).len(), 9);
        // Cut off inside its start: given back as it came.
        assert_eq!(clean(b"x\x1b]69"), "x\x1b]69");
    }

    #[test]
    fn a_command_reads_as_typed_at_a_prompt() {
        assert_eq!(command_line("echo hello"), "$ echo hello\n");
        assert_eq!(
            command_line("for i in 1 2\ndo echo $i; done"),
            "$ for i in 1 2\n> do echo $i; done\n"
        );
    }
}
