//! The raw stream as a person or a recording may see it: decoded as UTF-8
//! a piece at a time and passed through the session's masker
//! ([`crate::mask::StreamMasker`], the same values and shapes the agent's
//! replies are masked with).
//!
//! What raw masking cannot catch: a secret the program broke up with
//! escape sequences (colour in the middle of a token) or drew out of order
//! (cursor movement); the rendered text the agent sees is masked after
//! rendering and catches those. Bytes that are not UTF-8 become U+FFFD.
//!
//! Bounds: at most 3 bytes of an unfinished character, and what the
//! masker holds back to decide a match.

use std::sync::Arc;

use crate::mask::{Secrets, StreamMasker};

/// One raw stream's decoder and masker.
#[derive(Debug)]
pub struct RawMasker {
    secrets: Arc<Secrets>,
    masker: StreamMasker,
    /// The start of a character whose remaining bytes are still to come.
    partial: Vec<u8>,
}

impl RawMasker {
    /// A stream masked with `secrets`.
    pub fn new(secrets: Arc<Secrets>) -> RawMasker {
        RawMasker { secrets, masker: StreamMasker::new(), partial: Vec::new() }
    }

    /// Takes the next bytes and returns the text that can be shown now,
    /// masked. The rest (an unfinished character, the start of what may be
    /// a secret) comes with later bytes or [`RawMasker::finish`].
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let text = self.decode(bytes);
        self.masker.push(&self.secrets, &text, false).0.into_owned()
    }

    /// Everything still held back, masked: the stream ends here.
    pub fn finish(&mut self) -> String {
        let mut text = String::new();
        if !self.partial.is_empty() {
            text.push(char::REPLACEMENT_CHARACTER);
            self.partial.clear();
        }
        self.masker.push(&self.secrets, &text, true).0.into_owned()
    }

    /// Decodes `bytes` after what was left over, keeping an unfinished last
    /// character for the next call.
    fn decode(&mut self, bytes: &[u8]) -> String {
        let joined;
        let input: &[u8] = if self.partial.is_empty() {
            bytes
        } else {
            joined = [std::mem::take(&mut self.partial).as_slice(), bytes].concat();
            &joined
        };
        let mut text = String::with_capacity(input.len());
        let mut chunks = input.utf8_chunks().peekable();
        while let Some(chunk) = chunks.next() {
            text.push_str(chunk.valid());
            let invalid = chunk.invalid();
            if invalid.is_empty() {
                continue;
            }
            // An invalid end of the input may be a character cut short.
            let last = chunks.peek().is_none();
            let at_end = last && std::str::from_utf8(invalid).is_err() && invalid.len() < 4;
            if at_end && starts_character(invalid, input.len() - invalid.len(), input) {
                self.partial.extend_from_slice(invalid);
            } else {
                text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        text
    }
}

/// Whether `tail`, the last bytes of `input` from `at`, is the start of a
/// character whose other bytes have not come yet.
fn starts_character(tail: &[u8], at: usize, input: &[u8]) -> bool {
    debug_assert_eq!(&input[at..], tail);
    let Some(&lead) = tail.first() else { return false };
    let needed = match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return false,
    };
    tail.len() < needed && tail[1..].iter().all(|&b| b & 0xC0 == 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Arc<Secrets> {
        Arc::new(Secrets::new([("TOKEN".to_owned(), "hunter2-very-secret".to_owned())], false))
    }

    fn all(masker: &mut RawMasker, pieces: &[&[u8]]) -> String {
        let mut text: String = pieces.iter().map(|piece| masker.push(piece)).collect();
        text.push_str(&masker.finish());
        text
    }

    #[test]
    fn a_secret_split_at_every_byte_is_masked() {
        let stream = b"login: hunter2-very-secret\r\nok\r\n";
        for at in 0..stream.len() {
            let mut masker = RawMasker::new(secrets());
            let text = all(&mut masker, &[&stream[..at], &stream[at..]]);
            assert!(!text.contains("hunter2"), "split at {at}: {text}");
            assert!(text.starts_with("login: ") && text.ends_with("\r\nok\r\n"), "{text}");
        }
    }

    #[test]
    fn characters_split_across_reads_stay_whole() {
        let stream = "é€😀 ok".as_bytes();
        for at in 0..stream.len() {
            let mut masker = RawMasker::new(Arc::new(Secrets::none()));
            assert_eq!(all(&mut masker, &[&stream[..at], &stream[at..]]), "é€😀 ok", "at {at}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_become_replacement_characters() {
        let mut masker = RawMasker::new(Arc::new(Secrets::none()));
        assert_eq!(all(&mut masker, &[b"a\xffb\xc3", b"("]), "a\u{fffd}b\u{fffd}(");
        let mut masker = RawMasker::new(Arc::new(Secrets::none()));
        assert_eq!(all(&mut masker, &[b"cut \xe2\x82"]), "cut \u{fffd}");
    }
}
