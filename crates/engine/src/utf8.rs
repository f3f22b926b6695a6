//! Lossy UTF-8 decoding of a byte stream that arrives in pieces (a
//! command's pipe, a terminal's raw stream): a character split between two
//! pieces is kept whole, and only bytes that can never be UTF-8 become
//! U+FFFD, exactly as decoding the whole stream at once would. Bounds: at
//! most three bytes held back.

/// Lossy UTF-8 decoding of a byte stream that arrives in chunks: a
/// character split between two chunks is kept whole, and only bytes that
/// can never be UTF-8 become U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Decoder {
    /// The start of a character whose remaining bytes have not come yet
    /// (at most three bytes).
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes the next chunk.
    pub(crate) fn decode(&mut self, chunk: &[u8]) -> String {
        let joined;
        let bytes = if self.pending.is_empty() {
            chunk
        } else {
            let mut pending = std::mem::take(&mut self.pending);
            pending.extend_from_slice(chunk);
            joined = pending;
            &joined[..]
        };
        let mut text = String::with_capacity(bytes.len());
        let mut pieces = bytes.utf8_chunks().peekable();
        while let Some(piece) = pieces.next() {
            text.push_str(piece.valid());
            let invalid = piece.invalid();
            if invalid.is_empty() {
                continue;
            }
            let at_end = pieces.peek().is_none();
            if at_end && is_incomplete_character(invalid) {
                self.pending.extend_from_slice(invalid);
            } else {
                text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        text
    }

    /// Ends the stream: a character still incomplete becomes U+FFFD.
    pub(crate) fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            return String::new();
        }
        self.pending.clear();
        char::REPLACEMENT_CHARACTER.to_string()
    }
}

/// Whether `bytes` is the valid start of a character that is only missing
/// its last bytes.
fn is_incomplete_character(bytes: &[u8]) -> bool {
    matches!(std::str::from_utf8(bytes), Err(err) if err.error_len().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decoder_matches_whole_stream_decoding_at_every_split() {
        let stream: &[u8] = b"a\xc3\xa9b\xe2\x82\xacc\xf0\x9f\x98\x80d\xffe\xe2\x82f\xf0\x9f";
        let expected = String::from_utf8_lossy(stream).into_owned();
        for split in 0..=stream.len() {
            let mut decoder = Utf8Decoder::default();
            let (first, second) = stream.split_at(split);
            let text = decoder.decode(first) + &decoder.decode(second) + &decoder.finish();
            assert_eq!(text, expected, "split at {split}");
        }
        let mut decoder = Utf8Decoder::default();
        let mut text: String = stream.iter().map(|&b| decoder.decode(&[b])).collect();
        text += &decoder.finish();
        assert_eq!(text, expected, "byte by byte");
    }
}
