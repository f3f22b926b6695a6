//! Counting text as the other parts of output need it: characters, lines,
//! byte offsets of characters, the characters a text takes inside a JSON
//! string, and a budget shared fairly among pieces.
//!
//! Pure functions of their arguments; nothing here cuts or keeps text.

/// The characters `c` takes inside a JSON string, as serde_json writes it:
/// a quote, a backslash and the common control characters take two
/// (`\"`, `\n`), the other control characters six (`\u001b`).
pub(super) fn json_weight(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

/// The characters `text` takes inside a JSON string (a quote, a backslash
/// and a newline take two, other control characters six): what a client
/// that hands its model the structured content counts, and never less than
/// the text's own length.
pub fn json_chars(text: &str) -> usize {
    text.chars().map(json_weight).sum()
}

/// `budget` shared among pieces of `sizes`, fairly: a piece that needs
/// less than an equal share gets what it needs, and what it leaves is
/// shared among the others. The shares add up to at most `budget`, and a
/// piece never gets more than its size.
pub fn share(budget: usize, sizes: &[usize]) -> Vec<usize> {
    let mut shares = vec![0; sizes.len()];
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut left = budget;
    for (done, &i) in order.iter().enumerate() {
        let equal = left / (sizes.len() - done);
        shares[i] = sizes[i].min(equal);
        left -= shares[i];
    }
    shares
}

/// Number of characters in `text`, counted fast on its bytes.
pub(crate) fn count_chars(text: &str) -> usize {
    text.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

/// Newline characters in `text` (the lines it ends, as `wc -l` counts
/// them).
pub(super) fn count_lines(text: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', text).count()
}

/// Byte index of the `n`th character of `text` (its length if shorter).
pub(super) fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(index, _)| index)
}
