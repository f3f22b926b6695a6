//! The one place every piece of output text passes: after rendering (for
//! `run`, after UTF-8 decoding) and before anything keeps, shows, reports or
//! announces it. It masks secrets (`mask.rs`) with a stream's own state
//! ([`Masking`]), so a secret split between pieces is masked as if it came
//! whole; text shown but not kept (an unfinished line, a progress line)
//! passes on a copy of that state ([`pass_shown`]).
//!
//! Invariant: only this file makes a [`Passed`], the only text a view or a
//! log takes in, so no text reaches either without passing here.
//!
//! It does not cut, keep or show anything.

use std::borrow::Cow;
use std::sync::Arc;

use crate::mask::{Secrets, StreamMasker};

/// Output text that passed `pass`. Its fields are private and only `pass`
/// makes one, so every view and log write, which take only this, is text
/// that passed the one place.
#[derive(Debug)]
pub(crate) struct Passed<'a> {
    text: Cow<'a, str>,
    /// Secrets masked in it.
    masked: u64,
}

impl Passed<'_> {
    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The text, owned.
    pub(crate) fn into_string(self) -> String {
        self.text.into_owned()
    }

    /// How many secrets were masked in it.
    pub(crate) fn masked(&self) -> u64 {
        self.masked
    }
}

/// How one stream of output is masked: the secrets, and the stream's
/// state (the undecided tail held back, what the last piece left open).
#[derive(Debug, Clone)]
pub(crate) struct Masking {
    secrets: Arc<Secrets>,
    stream: StreamMasker,
}

impl Masking {
    /// A stream masked with `secrets`, nothing held yet.
    pub(crate) fn new(secrets: Arc<Secrets>) -> Masking {
        Masking { secrets, stream: StreamMasker::new() }
    }

    /// The secrets.
    pub(crate) fn secrets(&self) -> &Arc<Secrets> {
        &self.secrets
    }
}

/// The one place every piece of output text passes, once, in order, before
/// anything keeps, shows, reports or announces it (see the module's
/// comment): it masks the secrets of `masking` in `text`, the next piece of
/// its stream, and returns what can be released; the undecided tail (the
/// beginning of what may be a secret) is held until the next piece, or
/// `end` (the stream ends here) releases it.
///
/// In the crate's own tests it marks `tests::PASS_WITNESS` wherever the
/// word appears, in a way that shows a second pass, so that a test can
/// prove every path of output takes this one, once.
pub(crate) fn pass<'a>(masking: &mut Masking, text: &'a str, end: bool) -> Passed<'a> {
    let (text, masked) = masking.stream.push(&masking.secrets, text, end);
    #[cfg(test)]
    if text.contains(tests::PASS_WITNESS) {
        return Passed { text: Cow::Owned(tests::mark_witness(&text)), masked };
    }
    Passed { text, masked }
}

/// Text shown but not kept (the line a command has not finished, a
/// progress line), as `pass` passes it after what `masking` holds: the
/// held text and `text`, masked as far as they can be decided now, leaving
/// the stream as it is. What this can show of a secret is the part that
/// was held while the rest of it was not printed yet, at most the first
/// [`crate::mask::PREVIEW_CHARS`] characters of a registered value
/// ([`StreamMasker::preview`]).
pub(crate) fn pass_shown(masking: &Masking, text: &str) -> Passed<'static> {
    let (text, masked) = masking.stream.preview(&masking.secrets, text);
    #[cfg(test)]
    if text.contains(tests::PASS_WITNESS) {
        return Passed { text: Cow::Owned(tests::mark_witness(&text)), masked };
    }
    Passed { text: Cow::Owned(text), masked }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A word no other test prints: in test builds `pass` marks it, so
    /// that the surfaces of output show whether it passed there, and how
    /// often.
    pub(crate) const PASS_WITNESS: &str = "pass-witness-7f3a";

    /// `text` passed with nothing to mask, as a piece of a stream that ends.
    pub(crate) fn plain(text: &str) -> Passed<'_> {
        pass(&mut Masking::new(Arc::new(Secrets::none())), text, true)
    }

    /// `text` with [`PASS_WITNESS`] marked as `pass` marks it in tests:
    /// `<<` and `>>` around each appearance, so a text that passed twice
    /// shows it doubled and one that never passed shows it bare.
    pub(crate) fn mark_witness(text: &str) -> String {
        text.replace(PASS_WITNESS, &format!("<<{PASS_WITNESS}>>"))
    }

    /// How `text` shows the witness: (marked once, marked more than once,
    /// bare). Every appearance of the word is exactly one of them.
    pub(crate) fn witness_passes(text: &str) -> (usize, usize, usize) {
        let all = text.matches(PASS_WITNESS).count();
        let more = text.matches(&format!("<<<<{PASS_WITNESS}")).count();
        let marked = text.matches(&format!("<<{PASS_WITNESS}>>")).count();
        (marked - more, more, all - marked)
    }

    #[test]
    fn the_witness_shows_how_often_text_passed() {
        let word = PASS_WITNESS;
        assert_eq!(witness_passes(&format!("a {word} b")), (0, 0, 1));
        assert_eq!(witness_passes(plain(&format!("a {word} b\n")).as_str()), (1, 0, 0));
        let twice = plain(&format!("{word} and {word}")).into_string();
        assert_eq!(witness_passes(&twice), (2, 0, 0));
        assert_eq!(witness_passes(plain(&twice).as_str()), (0, 2, 0));
        // Other text passes untouched, without a copy.
        assert!(matches!(plain("plain").text, Cow::Borrowed("plain")));
    }
}
