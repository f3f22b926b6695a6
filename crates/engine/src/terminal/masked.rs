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
//! Bounds: at most 3 bytes of an unfinished character (`utf8.rs`), and
//! what the masker holds back to decide a match.

use std::sync::Arc;

use crate::mask::{Secrets, StreamMasker};
use crate::utf8::Utf8Decoder;

/// One raw stream's decoder and masker.
#[derive(Debug)]
pub struct RawMasker {
    secrets: Arc<Secrets>,
    masker: StreamMasker,
    decoder: Utf8Decoder,
}

impl RawMasker {
    /// A stream masked with `secrets`.
    pub fn new(secrets: Arc<Secrets>) -> RawMasker {
        RawMasker { secrets, masker: StreamMasker::new(), decoder: Utf8Decoder::default() }
    }

    /// Takes the next bytes and returns the text that can be shown now,
    /// masked. The rest (an unfinished character, the start of what may be
    /// a secret) comes with later bytes or [`RawMasker::finish`].
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let text = self.decoder.decode(bytes);
        self.masker.push(&self.secrets, &text, false).0.into_owned()
    }

    /// Everything still held back, masked: the stream ends here.
    pub fn finish(&mut self) -> String {
        let text = self.decoder.finish();
        self.masker.push(&self.secrets, &text, true).0.into_owned()
    }
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
