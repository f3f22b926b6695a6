//! What a viewer must not get of the raw stream, and what it should get
//! instead: the shell integration's marker sequences (OSC 6973, which carry
//! the session's nonce: a viewer that learnt it could forge a command's
//! end) are taken out, and the echo of the line shellkeep types to run an
//! agent's command (` \__sk_pre 3;\builtin eval -- "$__sk_c"`, with the bell
//! its C-u rings) is replaced by the agent's command as a person would
//! have typed it (`$ make test`).
//!
//! A pure filter over bytes, fed a piece at a time: it holds back at most
//! the start of a marker (7 bytes) or of an echo ([`MAX_ECHO`] bytes), and
//! gives up on an echo that does not look like one (a person's keys in
//! the middle), passing it on as it came. It does not mask: the caller
//! masks what it returns.

/// The start of a marker sequence.
const MARKER_START: &[u8] = b"\x1b]6973;";

/// The start of the echo of a line shellkeep types.
const ECHO_START: &[u8] = b" \\__sk_";

/// The longest echo recognised; a longer line is passed on as it is.
pub const MAX_ECHO: usize = 512;

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
    /// A possible echo of a typed line, held back.
    echo: Vec<u8>,
    /// The agent's command whose typed line's echo is still to come.
    command: Option<String>,
}

impl Default for Cleaner {
    fn default() -> Self {
        Cleaner::new()
    }
}

impl Cleaner {
    /// A filter at the start of a stream.
    pub fn new() -> Cleaner {
        Cleaner { state: State::Plain, marker: Vec::new(), echo: Vec::new(), command: None }
    }

    /// The agent's `command` is being typed: the echo of its line, next in
    /// the stream, is shown as `$ command`.
    pub fn command(&mut self, command: &str) {
        self.command = Some(command.to_owned());
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
        self.command = None;
        let mut out = std::mem::take(&mut self.echo);
        out.append(&mut self.marker);
        out
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
            self.pass(byte, out);
            return;
        }
        self.marker.push(byte);
        if self.marker.as_slice() == MARKER_START {
            self.marker.clear();
            self.state = State::Marker { dropped: 0, escape: false };
        } else if !MARKER_START.starts_with(&self.marker) {
            // Not ours; its last byte may start the next sequence.
            let mut held = std::mem::take(&mut self.marker);
            let last = held.pop();
            for byte in held {
                self.pass(byte, out);
            }
            match last {
                Some(0x1b) => self.marker.push(0x1b),
                Some(byte) => self.pass(byte, out),
                None => {}
            }
        }
    }

    /// Passes a byte that is not part of a marker on, through the check
    /// for the typed line's echo.
    fn pass(&mut self, byte: u8, out: &mut Vec<u8>) {
        let Some(command) = &self.command else {
            out.push(byte);
            return;
        };
        if self.echo.is_empty() && byte != ECHO_START[0] {
            // Before the echo: the bell of its C-u is dropped, a sequence
            // passes; a line of anything else means no echo comes.
            if byte == b'\n' {
                self.command = None;
            }
            if byte != 0x07 {
                out.push(byte);
            }
            return;
        }
        self.echo.push(byte);
        let held = self.echo.as_slice();
        let is_echo = if held.len() <= ECHO_START.len() {
            ECHO_START.starts_with(held)
        } else {
            held.len() <= MAX_ECHO
        };
        if !is_echo {
            // Not the echo: everything as it came.
            out.append(&mut self.echo);
            self.command = None;
        } else if byte == b'\n' {
            self.echo.clear();
            out.extend_from_slice(shown(command).as_bytes());
            self.command = None;
        }
    }
}

/// The agent's command as a person would have typed it at a prompt: `$ `,
/// its lines after the first with `> `.
fn shown(command: &str) -> String {
    let mut text = String::from("$ ");
    text.push_str(&command.replace('\n', "\n> "));
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &[u8] = b" \\__sk_pre 3;\\builtin eval -- \"$__sk_c\"\n";

    /// Feeds `pieces` with the command `command` typed first, whole and then
    /// split at every byte; both give the same.
    fn clean(command: Option<&str>, stream: &[u8]) -> String {
        let run = |split: usize| {
            let mut cleaner = Cleaner::new();
            if let Some(command) = command {
                cleaner.command(command);
            }
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
        assert_eq!(clean(None, stream), "a\x07bc\n");
        // Other sequences pass, the start of one that is not ours too.
        let other = b"\x1b]0;title\x07\x1b[1mbold\x1b[0m\x1b]697x\x1b";
        assert_eq!(clean(None, other), String::from_utf8_lossy(other));
        // A marker without its end stops being dropped after a bound.
        let mut long = b"\x1b]6973;".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_MARKER + 10));
        assert_eq!(clean(None, &long).len(), 9);
    }

    #[test]
    fn the_echo_of_the_typed_line_shows_the_agents_command() {
        let mut stream = b"\x1b]6973;ab;E;0;1\x07\x07".to_vec();
        stream.extend_from_slice(ECHO);
        stream.extend_from_slice(b"\x1b]6973;ab;S;3;3\x07hello\n");
        assert_eq!(clean(Some("echo hello"), &stream), "$ echo hello\nhello\n");
        let mut multi = ECHO.to_vec();
        multi.extend_from_slice(b"1\n2\n");
        assert_eq!(
            clean(Some("for i in 1 2\ndo echo $i; done"), &multi),
            "$ for i in 1 2\n> do echo $i; done\n1\n2\n"
        );
        // Without a command typed, an echo-like line is output like any.
        assert_eq!(clean(None, ECHO), String::from_utf8_lossy(ECHO));
    }

    /// What does not look like the echo is passed on whole, and the next
    /// echo-like line is not taken for it.
    #[test]
    fn what_is_not_the_echo_is_kept() {
        assert_eq!(clean(Some("x"), b"person typed\n"), "person typed\n");
        let mut later = b"first\n".to_vec();
        later.extend_from_slice(ECHO);
        assert_eq!(clean(Some("x"), &later), format!("first\n{}", String::from_utf8_lossy(ECHO)));
        let mut long = b" \\__sk_".to_vec();
        long.extend(std::iter::repeat_n(b'y', MAX_ECHO));
        long.push(b'\n');
        assert_eq!(clean(Some("x"), &long), String::from_utf8_lossy(&long));
        // Cut off before its end: given back as it came.
        assert_eq!(clean(Some("x"), b" \\__sk_pre 3;"), " \\__sk_pre 3;");
        // A sequence before the echo passes, and the echo is still found.
        let mut after = b"\x1b[?2004l\x07".to_vec();
        after.extend_from_slice(ECHO);
        assert_eq!(clean(Some("ls"), &after), "\x1b[?2004l$ ls\n");
    }
}
