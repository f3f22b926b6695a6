//! The integration's marker sequences taken out of what watchers are shown:
//! OSC 6973 (`ESC ] 6973 ; nonce ; … BEL` or `ESC \`) carries the session's
//! nonce, which nothing outside the engine may learn (with it, a viewer
//! could print a marker that looks like the shell's), and means nothing to
//! a terminal.
//!
//! A filter over bytes fed a piece at a time, for the stream the reader
//! thread publishes. Bounds: it holds back at most the first bytes of a
//! marker's start (`ESC ] 6973 ;`, 7 bytes); a marker longer than
//! [`MAX_MARKER`] bytes is not the shell's, and its rest is passed on.

/// The start of a marker sequence.
const MARKER_START: &[u8] = b"\x1b]6973;";

/// The most bytes of one marker taken out.
const MAX_MARKER: usize = 4096;

/// The filter's place in the stream.
#[derive(Debug, Default)]
pub(crate) struct Markers {
    /// A possible start of a marker, held back.
    held: Vec<u8>,
    /// Inside a marker: bytes taken out so far, and whether the last one
    /// was ESC (the start of its `ESC \` end).
    inside: Option<(usize, bool)>,
}

impl Markers {
    /// Takes the next `bytes`; returns them without markers (and without
    /// what may start one, held for the next call).
    pub(crate) fn filter(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut rest = bytes;
        while !rest.is_empty() {
            if let Some((taken, escape)) = &mut self.inside {
                let byte = rest[0];
                rest = &rest[1..];
                *taken += 1;
                let ends = byte == 0x07 || (*escape && byte == b'\\');
                *escape = byte == 0x1b;
                if ends || *taken > MAX_MARKER {
                    self.inside = None;
                }
                continue;
            }
            if self.held.is_empty() {
                // Most output has no ESC: pass it on in one piece.
                let plain = rest.iter().position(|&b| b == 0x1b).unwrap_or(rest.len());
                out.extend_from_slice(&rest[..plain]);
                rest = &rest[plain..];
                if rest.is_empty() {
                    break;
                }
            }
            self.held.push(rest[0]);
            rest = &rest[1..];
            if self.held == MARKER_START {
                self.held.clear();
                self.inside = Some((0, false));
            } else if !MARKER_START.starts_with(&self.held) {
                // Not ours; its last byte may start the next sequence.
                let last = self.held.pop();
                out.append(&mut self.held);
                match last {
                    Some(0x1b) => self.held.push(0x1b),
                    Some(byte) => out.push(byte),
                    None => {}
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(pieces: &[&[u8]]) -> Vec<u8> {
        let mut markers = Markers::default();
        pieces.iter().flat_map(|piece| markers.filter(piece)).collect()
    }

    #[test]
    fn markers_are_taken_out_wherever_the_stream_is_split() {
        let stream: &[u8] =
            b"a\x1b]6973;0a1b2c;E;0;12\x07\x07b\x1b]6973;0a1b;S;1;1\x1b\\c\x1b[1m\x1b\x1b]0;t\x07d\n";
        let want: &[u8] = b"a\x07bc\x1b[1m\x1b\x1b]0;t\x07d\n";
        for split in 0..=stream.len() {
            assert_eq!(all(&[&stream[..split], &stream[split..]]), want, "split at {split}");
        }
        // Byte by byte too.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(all(&bytes), want);
    }

    #[test]
    fn a_marker_too_long_to_be_the_shells_is_passed_on_after_its_bound() {
        let mut stream = b"\x1b]6973;".to_vec();
        stream.extend(std::iter::repeat_n(b'x', MAX_MARKER + 10));
        let out = all(&[&stream]);
        assert_eq!(out.len(), 9);
    }
}
