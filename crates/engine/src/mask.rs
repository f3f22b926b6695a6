//! Secret masking, as a pure function of text and state: every registered
//! secret value, its encodings, and the shapes of well-known credentials
//! become [`MASK`] in output text, whole or in pieces. [`Secrets`] is what
//! is masked, built once; a [`StreamMasker`] is the state of one stream of
//! text.
//!
//! Not for: finding the values (`secrets.rs`), choosing which text passes
//! (`output::pass`, the one place every piece of output passes, and
//! `terminal::RawMasker` for a terminal's raw stream), or rendering.
//!
//! Invariant: any split of a stream masks as the stream would whole:
//! [`StreamMasker::push`] holds back every tail that could still begin a
//! match (the test `any_split_masks_as_the_whole_does` checks it).
//!
//! What masking cannot do: a command that sends a secret over the network,
//! writes it to a file of its own, or prints it transformed in a way not
//! listed at [`Secrets`] (reversed, split with other text between its
//! parts, another encoding) is not stopped.

use std::borrow::Cow;
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

/// What a masked secret becomes (OpenHands' words, which models know).
pub const MASK: &str = "<secret-hidden>";

/// The most characters of a registered value a preview shows when the
/// line it is on has not gone on yet ([`StreamMasker::preview`]).
pub(crate) const PREVIEW_CHARS: usize = 4;

/// Values shorter than this many bytes are not masked, nor are lines of a
/// multi-line value or encodings that short: a shorter one cannot be masked
/// without wrecking the output.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// The secrets of a session or of the `run` commands: values, their
/// encodings, and (if on) the shapes of well-known credentials. Built once,
/// from the list `secrets.rs` makes out of flags, files and the
/// environment. Its `Debug` shows names and counts, never a value.
///
/// What is masked, as [`MASK`]:
/// - each registered value of [`MIN_SECRET_LEN`] bytes or more, and each
///   line of a multi-line value on its own (lines of that length or more:
///   `forms`);
/// - for each of those, its base64 at each of the three byte alignments, its
///   URL encoding and its JSON string escaping (`encodings`);
/// - with shapes on, well-known credentials wherever they appear, registered
///   or not ([`SHAPES`]);
/// - a value a shape masked, wherever it comes again in the rest of the
///   same stream ([`StreamMasker::learn`]).
///
/// What is matched is the text a person sees: without invisible characters
/// ([`is_invisible`]), and base64 wrapped at 64 or 76 columns as one line
/// (`Seen`). Overlapping or touching matches are masked as their union: one
/// [`MASK`].
#[derive(Default)]
pub struct Secrets {
    /// The names of the registered values (for notices; never the values).
    names: Vec<String>,
    /// The values' patterns, then the shapes' beginnings, in one automaton:
    /// one pass over the text finds both.
    patterns: Option<Patterns>,
    /// How many of the patterns are values (the rest begin shapes).
    values: usize,
    /// Whether the shapes are masked.
    shapes: bool,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("patterns", &self.values)
            .field("shapes", &self.shapes)
            .finish()
    }
}

/// Two sets of secrets are equal when they mask the same: the same names,
/// patterns and shapes.
impl PartialEq for Secrets {
    fn eq(&self, other: &Secrets) -> bool {
        let sorted = |secrets: &Secrets| {
            secrets.patterns.as_ref().map(|patterns| patterns.beginnings.sorted.clone())
        };
        self.names == other.names
            && self.values == other.values
            && self.shapes == other.shapes
            && sorted(self) == sorted(other)
    }
}

/// A set of literal patterns: the automaton that finds them and what tells
/// whether a text ends with the beginning of one.
///
/// One Aho-Corasick automaton (a DFA) finds, in one pass, every overlapping
/// match of the values and their encodings and every literal beginning of a
/// shape; each beginning is then judged by its shape's rule ([`judge`]: a
/// run of its characters within its lengths, a URL's `:…@`, a PEM marker).
struct Patterns {
    matcher: AhoCorasick,
    beginnings: Beginnings,
    /// The values' patterns alone (for a preview's hold).
    values: Beginnings,
}

/// Sorted patterns, to tell whether the end of a text may begin one.
struct Beginnings {
    sorted: Vec<Vec<u8>>,
    first_bytes: [bool; 256],
    longest: usize,
}

impl Beginnings {
    fn new(patterns: &[Vec<u8>]) -> Beginnings {
        let mut sorted = patterns.to_vec();
        sorted.sort();
        sorted.dedup();
        let mut first_bytes = [false; 256];
        for pattern in &sorted {
            first_bytes[pattern[0] as usize] = true;
        }
        let longest = sorted.iter().map(Vec::len).max().unwrap_or(0);
        Beginnings { sorted, first_bytes, longest }
    }

    /// Where the shortest tail of `text` begins that is the beginning, and
    /// not the whole, of some pattern: the text from there may still become
    /// a match. `text.len()` when there is none.
    fn undecided_from(&self, text: &[u8]) -> usize {
        let from = text.len().saturating_sub(self.longest.saturating_sub(1));
        (from..text.len())
            .find(|&i| self.first_bytes[text[i] as usize] && self.is_proper_beginning(&text[i..]))
            .unwrap_or(text.len())
    }

    fn is_proper_beginning(&self, tail: &[u8]) -> bool {
        // Patterns that start with `tail` come right after it in order.
        let at = self.sorted.partition_point(|pattern| pattern.as_slice() < tail);
        self.sorted[at..]
            .iter()
            .take(2)
            .any(|pattern| pattern.len() > tail.len() && pattern.starts_with(tail))
    }
}

impl Secrets {
    /// Nothing to mask.
    pub fn none() -> Secrets {
        Secrets::default()
    }

    /// The secrets `values` (name, value), and the shapes of well-known
    /// credentials when `shapes`. A value shorter than [`MIN_SECRET_LEN`]
    /// bytes is skipped (the caller refuses or reports those first).
    pub fn new(values: impl IntoIterator<Item = (String, String)>, shapes: bool) -> Secrets {
        let mut names = Vec::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for (name, value) in values {
            if value.len() < MIN_SECRET_LEN {
                tracing::warn!(
                    "the secret {name} is shorter than {MIN_SECRET_LEN} bytes: not masked"
                );
                continue;
            }
            names.push(name);
            for form in forms(&value) {
                for encoded in encodings(&form) {
                    if encoded.len() >= MIN_SECRET_LEN {
                        patterns.push(encoded.into_bytes());
                    }
                }
            }
        }
        let values = patterns.len();
        if shapes {
            patterns.extend(SHAPES.iter().map(|shape| shape.begins.as_bytes().to_vec()));
        }
        let patterns = (!patterns.is_empty()).then(|| Patterns {
            // A DFA: one table lookup per byte, which keeps masking cheap
            // next to the rest of a byte's path (see the benchmark).
            matcher: AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .kind(Some(AhoCorasickKind::DFA))
                .build(&patterns)
                .expect("literal patterns build"),
            beginnings: Beginnings::new(&patterns),
            values: Beginnings::new(&patterns[..values]),
        });
        Secrets { names, patterns, values, shapes }
    }

    /// Whether nothing is masked at all.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_none()
    }

    /// The names of the registered values.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the shapes of well-known credentials are masked.
    pub fn masks_shapes(&self) -> bool {
        self.shapes
    }

    /// `text` masked whole, and how many masks it got: for text that is not
    /// part of a stream (a command line, a full screen).
    pub fn mask<'a>(&self, text: &'a str) -> (Cow<'a, str>, u64) {
        StreamMasker::default().push(self, text, true)
    }
}

/// The forms of a value that are masked: the value (unless it spans
/// lines), and each line of 8 or more bytes of a multi-line value.
fn forms(value: &str) -> Vec<String> {
    if !value.contains(['\n', '\r']) {
        return vec![value.to_owned()];
    }
    value
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|line| line.len() >= MIN_SECRET_LEN)
        .map(str::to_owned)
        .collect()
}

/// `form` and its encodings: base64 at three alignments
/// ([`base64_aligned`]), URL encoding ([`url_encode`]), JSON string
/// escaping (those that differ from it).
fn encodings(form: &str) -> Vec<String> {
    let mut all = vec![form.to_owned()];
    for prefix in 0..3 {
        all.push(base64_aligned(form.as_bytes(), prefix));
    }
    all.push(url_encode(form));
    let json = serde_json::to_string(form).expect("a string serializes");
    all.push(json[1..json.len() - 1].to_owned());
    all.sort();
    all.dedup();
    all
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The base64 characters of `value` encoded after `prefix` (0 to 2)
/// unknown bytes, less those that depend on the unknown bytes before it or
/// after it (and on padding): what any base64 of text that holds `value`
/// at that alignment contains. Masking all three alignments is what
/// GitHub's runner does.
pub(crate) fn base64_aligned(value: &[u8], prefix: usize) -> String {
    let mut bytes = vec![0u8; prefix];
    bytes.extend_from_slice(value);
    let bits = bytes.len() * 8;
    let first = (prefix * 8).div_ceil(6);
    let last = bits / 6;
    (first..last)
        .map(|j| {
            let bit = j * 6;
            let (byte, shift) = (bit / 8, bit % 8);
            let pair =
                (u16::from(bytes[byte]) << 8) | u16::from(*bytes.get(byte + 1).unwrap_or(&0));
            BASE64[((pair >> (10 - shift)) & 0x3f) as usize] as char
        })
        .collect()
}

/// `value` with every byte but `A-Z a-z 0-9 - . _ ~` percent-encoded.
pub(crate) fn url_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for &byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// How a shape's beginning is judged.
///
/// The shapes are literal beginnings and character runs, which [`judge`]
/// decides exactly and which also tell, at the end of a piece, how much is
/// still undecided ([`Verdict::Undecided`]); a regular expression engine
/// could not tell that.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// A token: its beginning, then a run of `body` characters of `min` to
    /// `max` (a longer run is masked up to `max`), with a digit in it when
    /// `digit`.
    Token { body: fn(u8) -> bool, min: usize, max: usize, digit: bool },
    /// `://user:PASSWORD@`: the password is masked.
    UrlPassword,
    /// `-----BEGIN … PRIVATE KEY-----`: the runs of base64 after it, to the
    /// next `-----`, are masked.
    PemBegin,
}

/// A well-known credential's literal beginning and its rule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// The literal it starts with.
    pub begins: &'static str,
    rule: Rule,
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn word_dash(b: u8) -> bool {
    word(b) || b == b'-'
}

fn alnum_dash(b: u8) -> bool {
    alnum(b) || b == b'-'
}

fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

const fn token(begins: &'static str, body: fn(u8) -> bool, min: usize, max: usize) -> Shape {
    Shape { begins, rule: Rule::Token { body, min, max, digit: false } }
}

const fn token_with_digit(
    begins: &'static str,
    body: fn(u8) -> bool,
    min: usize,
    max: usize,
) -> Shape {
    Shape { begins, rule: Rule::Token { body, min, max, digit: true } }
}

/// The shapes of well-known credentials, masked wherever they appear when
/// shapes are on, registered or not. At one place, the first that matches
/// wins; a token must not follow a letter, digit or `_`.
///
/// - GitHub tokens: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` and 36 or more
///   letters and digits; `github_pat_`;
/// - GitLab: `glpat-`;
/// - AWS access key ids: `AKIA` or `ASIA` and 16 capitals or digits;
/// - Slack: `xoxa-`, `xoxb-`, `xoxp-`, `xoxo-`, `xoxs-`, `xoxr-`;
/// - Stripe: `sk_live_`, `rk_live_`, `sk_test_`, `rk_test_`;
/// - OpenAI and Anthropic: `sk-` and 20 or more of `A-Z a-z 0-9 _ -` with a
///   digit (`sk-proj-…`, `sk-ant-…`);
/// - Google API keys: `AIza` and 35 characters;
/// - the body of a private key's PEM block: the runs of base64 between
///   `-----BEGIN … PRIVATE KEY-----` and the next `-----`;
/// - the password of a URL (`scheme://user:PASSWORD@host`: only the
///   password).
pub(crate) const SHAPES: &[Shape] = &[
    token("ghp_", alnum, 36, 255),
    token("gho_", alnum, 36, 255),
    token("ghu_", alnum, 36, 255),
    token("ghs_", alnum, 36, 255),
    token("ghr_", alnum, 36, 255),
    token("github_pat_", word, 22, 255),
    token("glpat-", word_dash, 20, 255),
    token("AKIA", upper_digit, 16, 16),
    token("ASIA", upper_digit, 16, 16),
    token("xoxa-", alnum_dash, 10, 255),
    token("xoxb-", alnum_dash, 10, 255),
    token("xoxp-", alnum_dash, 10, 255),
    token("xoxo-", alnum_dash, 10, 255),
    token("xoxs-", alnum_dash, 10, 255),
    token("xoxr-", alnum_dash, 10, 255),
    token("sk_live_", alnum, 16, 255),
    token("rk_live_", alnum, 16, 255),
    token("sk_test_", alnum, 16, 255),
    token("rk_test_", alnum, 16, 255),
    // OpenAI (`sk-…`, `sk-proj-…`) and Anthropic (`sk-ant-…`).
    token_with_digit("sk-", word_dash, 20, 255),
    token("AIza", word_dash, 35, 35),
    Shape { begins: "://", rule: Rule::UrlPassword },
    Shape { begins: "-----BEGIN ", rule: Rule::PemBegin },
];

/// Bytes of a URL's user name and of its password that are looked at.
const URL_PART_LIMIT: usize = 256;

/// Values a stream learns from the shapes it masked
/// ([`StreamMasker::learn`]); a stream that masks more shapes than this
/// masks the later ones where they are only.
pub(crate) const LEARNED_LIMIT: usize = 16;

/// The longest value a stream learns: a shape's longest match.
pub(crate) const LEARNED_BYTES: usize = 256;

/// Bytes between `-----BEGIN ` and `PRIVATE KEY` that are looked at.
const PEM_LABEL_LIMIT: usize = 40;

/// What the text at a shape's beginning is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// A match: the span to mask, and where the match ends.
    Match(Range<usize>, usize),
    /// Not one.
    No,
    /// The text ends before it is decided.
    Undecided,
}

/// Judges `shape` at `at` in `text` (the beginning is there); `end`: no more
/// text comes.
fn judge(shape: &Shape, text: &[u8], at: usize, end: bool) -> Verdict {
    let start = at + shape.begins.len();
    let open = |verdict: Verdict| if end { verdict } else { Verdict::Undecided };
    match shape.rule {
        Rule::Token { body, min, max, digit } => {
            let run = text[start..].iter().take(max).take_while(|&&b| body(b)).count();
            let judged = || {
                let has_digit = !digit || text[start..start + run].iter().any(u8::is_ascii_digit);
                if run >= min && has_digit {
                    Verdict::Match(at..start + run, start + run)
                } else {
                    Verdict::No
                }
            };
            if run < max && start + run == text.len() { open(judged()) } else { judged() }
        }
        Rule::UrlPassword => {
            let user = |b: &&u8| !matches!(**b, b'/' | b':' | b'@') && !b.is_ascii_whitespace();
            let user_len = text[start..].iter().take(URL_PART_LIMIT).take_while(user).count();
            let colon = start + user_len;
            match text.get(colon) {
                None if user_len < URL_PART_LIMIT => return open(Verdict::No),
                Some(b':') => {}
                _ => return Verdict::No,
            }
            let pass = |b: &&u8| !matches!(**b, b'/' | b'@') && !b.is_ascii_whitespace();
            let pass_len = text[colon + 1..].iter().take(URL_PART_LIMIT).take_while(pass).count();
            let at_sign = colon + 1 + pass_len;
            match text.get(at_sign) {
                None if pass_len < URL_PART_LIMIT => open(Verdict::No),
                Some(b'@') if pass_len > 0 => Verdict::Match(colon + 1..at_sign, at_sign),
                _ => Verdict::No,
            }
        }
        Rule::PemBegin => {
            const TAIL: &[u8] = b"PRIVATE KEY";
            let label = |b: &&u8| b.is_ascii_uppercase() || b.is_ascii_digit() || **b == b' ';
            let rest = &text[start..];
            // The label runs into `PRIVATE KEY` (its letters are label
            // letters too): look for it at each place in the run.
            let run = rest.iter().take(PEM_LABEL_LIMIT + TAIL.len()).take_while(label).count();
            for i in 0..=run.min(PEM_LABEL_LIMIT) {
                let after = &rest[i..];
                let wanted: &[&[u8]] = &[b"PRIVATE KEY-----", b"PRIVATE KEY BLOCK-----"];
                for marker in wanted {
                    if after.starts_with(marker) {
                        let end_at = start + i + marker.len();
                        return Verdict::Match(end_at..end_at, end_at);
                    }
                    if marker.starts_with(after) {
                        return open(Verdict::No);
                    }
                }
            }
            if run == rest.len() && run < PEM_LABEL_LIMIT + TAIL.len() {
                return open(Verdict::No);
            }
            Verdict::No
        }
    }
}

/// Where a PEM body stands at a place in the stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Pem {
    /// Not in a private key's body.
    #[default]
    Out,
    /// In one, after this many dashes in a row.
    In(u8),
}

impl Pem {
    /// The state after `byte`, and whether `byte` is part of the body's
    /// key material (masked).
    fn step(self, byte: u8) -> (Pem, bool) {
        let Pem::In(dashes) = self else { return (Pem::Out, false) };
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => (Pem::In(0), true),
            b'-' if dashes >= 4 => (Pem::Out, false),
            b'-' => (Pem::In(dashes + 1), false),
            b' ' | b'\t' | b'\r' | b'\n' | b':' | b',' => (Pem::In(0), false),
            // Anything else cannot be in a key's body: it ended unseen.
            _ => (Pem::Out, false),
        }
    }
}

/// The masking state of one stream of text (a terminal command's output,
/// one `run` stream, what background jobs print): the tail held back until
/// it is decided, and what the last release left open. So a secret split
/// between pieces, or printed in pieces with pauses between them, is masked
/// as if the stream had come whole.
#[derive(Clone, Default)]
pub struct StreamMasker {
    /// Text not released yet.
    held: String,
    /// Bytes at the start of `held` inside a mask already released.
    covered: usize,
    /// The released text ends with a mask that reaches the start of `held`
    /// plus `covered`: a match starting there joins it.
    open: bool,
    /// The byte released last (for the rule that a token does not follow a
    /// letter, digit or `_`).
    before: Option<u8>,
    /// Whether the start of `held` is in a private key's PEM body.
    pem: Pem,
    /// Whether the line the start of `held` is on has something before it
    /// that is not base64.
    line_not_b64: bool,
    /// Else, how many base64 characters the line has before it.
    line_b64: usize,
    /// Values a shape masked earlier in the stream (a URL's password, a
    /// token): see [`StreamMasker::learn`].
    learned: Vec<String>,
}

impl std::fmt::Debug for StreamMasker {
    /// The held text may begin a secret: only its length is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMasker").field("held_bytes", &self.held.len()).finish()
    }
}

impl StreamMasker {
    /// A stream with nothing held.
    pub fn new() -> StreamMasker {
        StreamMasker::default()
    }

    /// Whether text is held back.
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Takes in the next piece of the stream and returns the text that can
    /// be released, masked, with the number of masks in it; `end`: the
    /// stream ends here, so everything is released.
    ///
    /// It holds back the shortest tail that could still begin a match: at
    /// most the longest value pattern less one byte, and for a shape up to
    /// the first character that decides it (a token's run ends or reaches
    /// its longest, a URL reaches its `@`). The next piece decides it. So
    /// any split of a stream gives the same text as masking it whole. A mask
    /// that reaches the end of what was released stays open: what follows it
    /// and belongs to the same match is not released again.
    pub fn push<'a>(&mut self, secrets: &Secrets, text: &'a str, end: bool) -> (Cow<'a, str>, u64) {
        if secrets.is_empty() {
            return self.release_plain(text);
        }
        let joined;
        let window: &str = if self.held.is_empty() {
            text
        } else {
            joined = std::mem::take(&mut self.held) + text;
            &joined
        };
        // What a person sees: without the characters that print nothing.
        // Matches are found there and mapped back to the window, so a mask
        // covers the invisible characters inside a match too.
        // Base64 wrapped at 64 or 76 columns (`base64`, PEM) is matched as
        // if it were one line, when values are registered.
        let wrapped = secrets.values > 0;
        let line = (!self.line_not_b64).then_some(self.line_b64);
        let seen = Seen::of(window, line, wrapped);
        let (spans, release, pem_end, learned) = self.decide(secrets, seen.text(window), end);
        self.learned.extend(learned);
        let spans = spans.into_iter().map(|span| seen.span(span)).collect();
        let release = seen.at(release);
        let (out, masks) = self.release(window, spans, release, pem_end);
        match out {
            Some(out) => (Cow::Owned(out), masks),
            None if std::ptr::eq(window, text) => (Cow::Borrowed(&text[..release]), 0),
            None => (Cow::Owned(window[..release].to_owned()), 0),
        }
    }

    /// Finds, in `text`, the spans to mask and where the undecided text
    /// begins (the whole length at the end of the stream), with the PEM
    /// state there.
    /// Also the values that shapes masked, learned here (see
    /// [`StreamMasker::learn`]).
    fn decide(
        &self,
        secrets: &Secrets,
        text: &str,
        end: bool,
    ) -> (Vec<Range<usize>>, usize, Pem, Vec<String>) {
        let bytes = text.as_bytes();
        let mut spans: Vec<Range<usize>> = Vec::new();
        let mut found: Vec<(usize, usize)> = Vec::new();
        let mut release = text.len();
        if let Some(patterns) = &secrets.patterns {
            for m in patterns.matcher.find_overlapping_iter(bytes) {
                match m.pattern().as_usize().checked_sub(secrets.values) {
                    None => spans.push(m.start()..m.end()),
                    Some(shape) => found.push((m.start(), shape)),
                }
            }
            if !end {
                release = release.min(patterns.beginnings.undecided_from(bytes));
            }
        }
        let mut pem_end = self.pem;
        let mut shaped = Vec::new();
        if secrets.shapes {
            let (undecided, pem) = self.shapes(found, bytes, end, &mut spans, &mut shaped, release);
            release = undecided;
            pem_end = pem;
        }
        let learned = self.learn(text, &shaped, release, end, &mut spans, &mut release);
        (spans, release, pem_end, learned)
    }

    /// Masks in `text` the values shapes masked before in the stream, and
    /// those of `shaped` spans (released whole, before `release`) from
    /// where each is; holds back a tail that may begin one (unless `end`).
    /// Returns the values learned here.
    ///
    /// So a value a shape masked is masked wherever it comes again in the
    /// rest of the stream (`cat .env`: the password of `DATABASE_URL`, then
    /// `DB_PASSWORD`), if it has [`MIN_SECRET_LEN`] bytes or more; at most
    /// [`LEARNED_LIMIT`] values of at most [`LEARNED_BYTES`] bytes a stream.
    /// The scope is the stream (a command's output, one `run` stream), from
    /// where the value is learned on: what was released before cannot be
    /// taken back, and a set shared between commands would grow with every
    /// output. Each learned value costs one substring search per piece.
    fn learn(
        &self,
        text: &str,
        shaped: &[Range<usize>],
        before: usize,
        end: bool,
        spans: &mut Vec<Range<usize>>,
        release: &mut usize,
    ) -> Vec<String> {
        // Each new value, with where its span starts and ends.
        let mut new: Vec<(String, usize, usize)> = Vec::new();
        for span in shaped.iter().filter(|span| span.end <= before) {
            let value = &text[span.clone()];
            let known =
                self.learned.iter().chain(new.iter().map(|(v, _, _)| v)).any(|v| v == value);
            if value.len() >= MIN_SECRET_LEN
                && value.len() <= LEARNED_BYTES
                && !known
                && self.learned.len() + new.len() < LEARNED_LIMIT
            {
                new.push((value.to_owned(), span.start, span.end));
            }
        }
        let all = self.learned.iter().map(|v| (v.as_str(), 0, 0));
        for (value, from, after) in all.chain(new.iter().map(|(v, a, b)| (v.as_str(), *a, *b))) {
            spans.extend(
                text[from..].match_indices(value).map(|(i, _)| from + i..from + i + value.len()),
            );
            if !end {
                // The shortest tail that may begin it.
                let tail = text.len().saturating_sub(value.len() - 1).max(after);
                if let Some(i) = (tail..text.len()).find(|&i| {
                    text.is_char_boundary(i) && value.as_bytes().starts_with(&text.as_bytes()[i..])
                }) {
                    *release = (*release).min(i);
                }
            }
        }
        new.into_iter().map(|(value, _, _)| value).collect()
    }

    /// What the stream shows if it ended now, without ending it: the held
    /// text and `text` after it, masked as far as they can be decided, and
    /// the number of masks. For what a reply shows but nothing keeps (the
    /// line a command has not finished, a progress line).
    ///
    /// A tail that begins a registered value (or one of its encodings) is
    /// shown to its first [`PREVIEW_CHARS`] characters only, until the line
    /// goes on or ends: the rest of the value may come with the rest of the
    /// line.
    ///
    /// The terminal's committed text comes in whole lines (no pattern spans
    /// a line, apart from a PEM body, which is decided a character at a
    /// time), so there nothing is held except after a line longer than the
    /// renderer's limit was cut, and a reply shows that held part together
    /// with the rest of the line.
    pub fn preview(&self, secrets: &Secrets, text: &str) -> (String, u64) {
        let mut stream = self.clone();
        let (released, masks) = stream.push(secrets, text, false);
        let mut out = released.into_owned();
        let held = std::mem::take(&mut stream.held);
        let cut = secrets.patterns.as_ref().map_or(held.len(), |patterns| {
            let seen = Seen::of(&held, None, false);
            let visible = seen.text(&held);
            let from = patterns.values.undecided_from(visible.as_bytes());
            match visible[from..].char_indices().nth(PREVIEW_CHARS) {
                Some((shown, _)) => seen.at(from + shown),
                None => held.len(),
            }
        });
        stream.held = held[..cut].to_owned();
        let (rest, more) = stream.push(secrets, "", true);
        out.push_str(&rest);
        (out, masks + more)
    }

    /// With nothing to mask: releases the held text (from a time there was)
    /// and `text`.
    fn release_plain<'a>(&mut self, text: &'a str) -> (Cow<'a, str>, u64) {
        if self.held.is_empty() {
            return (Cow::Borrowed(text), 0);
        }
        let held = std::mem::take(&mut self.held);
        let start = self.covered.min(held.len());
        *self = StreamMasker::default();
        (Cow::Owned(held[start..].to_owned() + text), 0)
    }

    /// Judges the shapes' beginnings `found` (place, index in [`SHAPES`])
    /// in `bytes` (its start is the start of `held`): adds their spans (to
    /// `shaped` too, but for PEM bodies), and returns where the undecided
    /// text begins (at most `release`) and the PEM state there.
    fn shapes(
        &self,
        mut found: Vec<(usize, usize)>,
        bytes: &[u8],
        end: bool,
        spans: &mut Vec<Range<usize>>,
        shaped: &mut Vec<Range<usize>>,
        mut release: usize,
    ) -> (usize, Pem) {
        if found.is_empty() && self.pem == Pem::Out {
            return (release, Pem::Out);
        }
        found.sort_unstable();
        let before = |at: usize| if at == 0 { self.before } else { Some(bytes[at - 1]) };
        // Tokens and URLs: leftmost first, no overlap, as one search of the
        // whole stream would find them.
        let mut matches: Vec<Range<usize>> = Vec::new();
        let mut next = 0;
        for &(at, index) in &found {
            let shape = &SHAPES[index];
            if at < next || matches!(shape.rule, Rule::PemBegin) {
                continue;
            }
            if matches!(shape.rule, Rule::Token { .. }) && before(at).is_some_and(word) {
                continue;
            }
            match judge(shape, bytes, at, end) {
                Verdict::Match(span, match_end) => {
                    if !span.is_empty() {
                        shaped.push(span.clone());
                        spans.push(span);
                    }
                    matches.push(at..match_end);
                    next = match_end;
                }
                Verdict::Undecided => {
                    release = release.min(at);
                    break;
                }
                Verdict::No => {}
            }
        }
        let begins: Vec<usize> = found
            .iter()
            .filter(|(_, index)| matches!(SHAPES[*index].rule, Rule::PemBegin))
            .map(|(at, _)| *at)
            .collect();
        let scan = pem_scan(bytes, self.pem, &begins, end);
        spans.extend(scan.spans);
        release = release.min(scan.undecided);
        // A match (or a PEM marker) is never cut by a release: the next
        // search finds it again, whole.
        loop {
            let cut =
                matches.iter().chain(&scan.markers).find(|r| r.start < release && release < r.end);
            match cut {
                Some(range) => release = range.start,
                None => break,
            }
        }
        // The state where the release ends: the scan again, up to there,
        // judged as an end (what was undecided there lies beyond it).
        let pem_at_release = if release == bytes.len() {
            scan.state
        } else {
            let begins: Vec<usize> = begins.into_iter().filter(|&at| at < release).collect();
            pem_scan(&bytes[..release], self.pem, &begins, true).state
        };
        (release, pem_at_release)
    }

    /// Releases `window[..release]` with `spans` masked (merged where they
    /// overlap or touch, joined to the mask left open), keeps the rest held;
    /// returns the released text (`None`: `window[..release]` unchanged)
    /// and the number of masks.
    fn release(
        &mut self,
        window: &str,
        mut spans: Vec<Range<usize>>,
        release: usize,
        pem: Pem,
    ) -> (Option<String>, u64) {
        let covered = self.covered.min(window.len());
        if spans.is_empty() && covered == 0 {
            // A mask left open stays open while nothing is released.
            self.keep(window, release, release, self.open && release == 0, pem);
            return (None, 0);
        }
        spans.sort_unstable_by_key(|span| (span.start, span.end));
        let mut out = String::with_capacity(release + MASK.len());
        let mut masks = 0;
        let mut done = covered;
        let mut open = self.open;
        for span in spans.into_iter().filter(|span| span.start < release) {
            if open && span.start <= done {
                done = done.max(span.end);
                continue;
            }
            if span.end <= done {
                continue;
            }
            out.push_str(&window[done.min(span.start)..span.start]);
            out.push_str(MASK);
            masks += 1;
            done = span.end;
            open = true;
        }
        if done < release {
            out.push_str(&window[done..release]);
            open = false;
            done = release;
        }
        self.keep(window, release, done, open, pem);
        (Some(out), masks)
    }

    /// Holds `window[release..]`; `done` is where the released text (or its
    /// last mask) ends.
    fn keep(&mut self, window: &str, release: usize, done: usize, open: bool, pem: Pem) {
        if release > 0 {
            self.before = Some(window.as_bytes()[release - 1]);
            let released = &window.as_bytes()[..release];
            let (line, carried) = match memchr::memrchr(b'\n', released) {
                Some(at) => (&released[at + 1..], 0),
                None if self.line_not_b64 => (&released[..0], usize::MAX),
                None => (released, self.line_b64),
            };
            self.line_not_b64 = carried == usize::MAX || !line.iter().all(|&b| b64_or_cr(b));
            self.line_b64 = if self.line_not_b64 {
                0
            } else {
                carried + line.iter().filter(|&&b| b != b'\r').count()
            };
        }
        self.held = window[release..].to_owned();
        self.covered = done.saturating_sub(release);
        self.open = open && done >= release;
        self.pem = pem;
    }
}

/// Whether `c` prints nothing where it stands in text a person reads: DEL
/// (which a terminal discards), the format characters (Unicode category
/// Cf: zero-width spaces and joiners, direction marks and isolates, the
/// soft hyphen, the byte-order mark, tags), the combining grapheme joiner
/// (U+034F) and the variation selectors.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{7f}'
            | '\u{ad}'
            | '\u{34f}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
            | '\u{e0100}'..='\u{e01ef}'
    )
}

/// The widths at which tools wrap base64: PEM and `openssl base64` (64),
/// `base64` and MIME (76).
const WRAP_COLUMNS: [usize; 2] = [64, 76];

/// A byte of base64 (or a carriage return, which the count skips).
fn b64_or_cr(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\r')
}

/// The line breaks (`\n`, or `\r\n`) in `bytes` that end a line of
/// exactly one of [`WRAP_COLUMNS`] base64 characters (`line`: how many the
/// first line has before `bytes`, `None` if it has something else). One
/// `memchr` pass; a line is looked at only when its length fits.
///
/// Such a line goes on on the next, so the base64 of a registered value is
/// matched across the break ([`Seen::of`] leaves it out).
fn wrap_breaks(bytes: &[u8], line: Option<usize>) -> Vec<Range<usize>> {
    let mut breaks = Vec::new();
    // Most text has no line that long: a line of 64 bytes or more holds a
    // whole aligned block of 32 with no line break (checked without a
    // branch per byte), or is the first line, carried from before.
    let first = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |at| at + 1);
    let long_first = line.is_some_and(|before| before + first >= WRAP_COLUMNS[0]);
    let long_later = bytes[first..]
        .chunks_exact(32)
        .any(|block| !block.iter().fold(false, |any, &b| any | (b == b'\n')));
    if !long_first && !long_later {
        return breaks;
    }
    let (mut start, mut carried) = (0, line);
    for newline in memchr::memchr_iter(b'\n', bytes) {
        let mut end = newline;
        while end > start && bytes[end - 1] == b'\r' {
            end -= 1;
        }
        let line = &bytes[start..end];
        if let Some(before) = carried
            && before + line.len() >= WRAP_COLUMNS[0]
            && line.iter().all(|&b| b64_or_cr(b))
            && WRAP_COLUMNS.contains(&(before + line.iter().filter(|&&b| b != b'\r').count()))
        {
            breaks.push(end..newline + 1);
        }
        (start, carried) = (newline + 1, Some(0));
    }
    // A wrapped line whose `\n` has not come yet, after its `\r`.
    let mut end = bytes.len();
    while end > start && bytes[end - 1] == b'\r' {
        end -= 1;
    }
    let line = &bytes[start..end];
    if end < bytes.len()
        && let Some(before) = carried
        && line.iter().all(|&b| b64_or_cr(b))
        && WRAP_COLUMNS.contains(&(before + line.iter().filter(|&&b| b != b'\r').count()))
    {
        breaks.push(end..bytes.len());
    }
    breaks
}

/// A window of text as a person sees it: without its invisible characters
/// ([`is_invisible`]) and the breaks of wrapped base64 ([`wrap_breaks`]),
/// with where each of its bytes is in the window.
///
/// Matches are found in it and mapped back ([`Seen::span`]): a value or a
/// shape with invisible characters inside is matched, and the whole span,
/// the invisible characters in it included, is masked (those outside a
/// match stay); a mask across a wrapped line's break takes the break with
/// it.
///
/// Bounded: text that is ASCII without DEL and holds no line of 64 or 76
/// characters is matched as it is, with no copy (one vectorised ASCII
/// check, one `memchr` for DEL, one `memchr` pass over line breaks when
/// values are registered); other text costs one copy of the window and one
/// `u32` (four bytes) per byte of it for the map back.
enum Seen {
    /// Nothing invisible: the window as it is.
    Same,
    /// The visible text, and for each of its bytes (and its end) where it
    /// is in the window.
    Visible(String, Vec<u32>),
}

impl Seen {
    /// `window` as seen; with `wrapped`, without the line breaks of base64
    /// wrapped at [`WRAP_COLUMNS`] (`line`: the base64 characters of its
    /// first line before the window, `None` if the line has others).
    fn of(window: &str, line: Option<usize>, wrapped: bool) -> Seen {
        let bytes = window.as_bytes();
        let breaks = if wrapped { wrap_breaks(bytes, line) } else { Vec::new() };
        let invisible =
            (!window.is_ascii() || bytes.contains(&0x7f)) && window.chars().any(is_invisible);
        if (!invisible && breaks.is_empty()) || u32::try_from(window.len()).is_err() {
            return Seen::Same;
        }
        let mut text = String::with_capacity(window.len());
        let mut at = Vec::with_capacity(window.len() + 1);
        let mut breaks = breaks.into_iter().peekable();
        for (i, c) in window.char_indices() {
            while breaks.peek().is_some_and(|b| b.end <= i) {
                breaks.next();
            }
            let dropped = breaks.peek().is_some_and(|b| b.start <= i);
            if !dropped && !is_invisible(c) {
                text.push(c);
                at.extend((i..i + c.len_utf8()).map(|b| b as u32));
            }
        }
        at.push(window.len() as u32);
        Seen::Visible(text, at)
    }

    /// The text matched.
    fn text<'a>(&'a self, window: &'a str) -> &'a str {
        match self {
            Seen::Same => window,
            Seen::Visible(text, _) => text,
        }
    }

    /// Where the place `i` of the visible text is in the window.
    fn at(&self, i: usize) -> usize {
        match self {
            Seen::Same => i,
            Seen::Visible(_, at) => at[i] as usize,
        }
    }

    /// A span of the visible text in the window: from its first visible
    /// byte to just after its last, with what is invisible between them.
    fn span(&self, span: Range<usize>) -> Range<usize> {
        match self {
            Seen::Same => span,
            Seen::Visible(..) if span.is_empty() => self.at(span.start)..self.at(span.start),
            Seen::Visible(_, at) => at[span.start] as usize..at[span.end - 1] as usize + 1,
        }
    }
}

/// What a scan for private-key PEM bodies found in a piece of text.
struct PemScan {
    /// The key material's runs.
    spans: Vec<Range<usize>>,
    /// Where the undecided text begins (a `-----BEGIN ` not judged yet).
    undecided: usize,
    /// The `-----BEGIN … PRIVATE KEY-----` markers found.
    markers: Vec<Range<usize>>,
    /// The state at the end of the text.
    state: Pem,
}

/// Scans `bytes` for private-key PEM bodies from state `pem`, with the
/// beginnings of `-----BEGIN ` at `begins`; `end`: no more text comes.
fn pem_scan(bytes: &[u8], mut pem: Pem, begins: &[usize], end: bool) -> PemScan {
    let shape = SHAPES.iter().find(|s| matches!(s.rule, Rule::PemBegin)).expect("a PEM shape");
    let mut scan =
        PemScan { spans: Vec::new(), undecided: bytes.len(), markers: Vec::new(), state: pem };
    let mut at = 0;
    let mut begins = begins.iter().copied();
    loop {
        if pem == Pem::Out {
            let Some(begin) = begins.find(|&b| b >= at) else {
                scan.state = Pem::Out;
                return scan;
            };
            match judge(shape, bytes, begin, end) {
                Verdict::Match(_, marker_end) => {
                    scan.markers.push(begin..marker_end);
                    pem = Pem::In(0);
                    at = marker_end;
                }
                Verdict::Undecided => {
                    scan.undecided = begin;
                    scan.state = Pem::Out;
                    return scan;
                }
                Verdict::No => at = begin + 1,
            }
            continue;
        }
        let mut run: Option<usize> = None;
        while at < bytes.len() && pem != Pem::Out {
            let (next, secret) = pem.step(bytes[at]);
            match (secret, run) {
                (true, None) => run = Some(at),
                (false, Some(start)) => {
                    scan.spans.push(start..at);
                    run = None;
                }
                _ => {}
            }
            pem = next;
            at += 1;
        }
        if let Some(start) = run {
            scan.spans.push(start..at);
        }
        if at >= bytes.len() {
            scan.state = pem;
            return scan;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(values: &[&str], shapes: bool) -> Secrets {
        Secrets::new(
            values.iter().enumerate().map(|(i, v)| (format!("S{i}"), (*v).to_owned())),
            shapes,
        )
    }

    fn masked(secrets: &Secrets, text: &str) -> String {
        secrets.mask(text).0.into_owned()
    }

    /// Standard base64 with padding, for the tests.
    fn base64(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(BASE64[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    const TOKEN: &str = "s3cr3t-Value_42!xyz";

    #[test]
    fn values_and_their_encodings_are_masked() {
        let secrets = secrets(&[TOKEN], false);
        assert_eq!(masked(&secrets, &format!("a {TOKEN} b")), "a <secret-hidden> b");
        for prefix in ["", "u", "us", "user:", "ab:cd"] {
            let encoded = base64(format!("{prefix}{TOKEN}").as_bytes());
            let out = masked(&secrets, &format!("Basic {encoded}\n"));
            assert!(out.contains(MASK), "{prefix:?}: {out}");
            // What is left of the encoding is what the bytes around the
            // value decide.
            let kept = out.replace(MASK, "").len() - "Basic \n".len();
            assert!(kept <= prefix.len() * 4 / 3 + 2 + 4, "{prefix:?}: {out}");
        }
        assert_eq!(
            masked(&secrets, "url s3cr3t-Value_42%21xyz and json s3cr3t-Value_42!xyz"),
            "url <secret-hidden> and json <secret-hidden>"
        );
        let quoted = secrets_with("pa\"ss\\word\t1");
        assert_eq!(masked(&quoted, r#"{"p":"pa\"ss\\word\t1"}"#), r#"{"p":"<secret-hidden>"}"#);
        // Short values are not masked.
        assert!(secrets_with("short").is_empty());
    }

    fn secrets_with(value: &str) -> Secrets {
        Secrets::new([("X".to_owned(), value.to_owned())], false)
    }

    #[test]
    fn each_line_of_a_multi_line_value_is_masked() {
        let value = "first-line-1234\nsecond-line-5678\nend";
        let secrets = secrets_with(value);
        assert_eq!(masked(&secrets, value), "<secret-hidden>\n<secret-hidden>\nend");
    }

    #[test]
    fn overlapping_matches_are_masked_as_their_union() {
        let secrets = secrets(&["abcdefgh12", "fgh12345678"], false);
        assert_eq!(masked(&secrets, "x abcdefgh12345678 y"), "x <secret-hidden> y");
        // Touching ones too.
        assert_eq!(masked(&secrets, "abcdefgh12fgh12345678"), "<secret-hidden>");
    }

    #[test]
    fn shapes_are_masked_registered_or_not() {
        let secrets = Secrets::new([], true);
        let cases = [
            ("token ghp_0123456789abcdefghijABCDEFGHIJ012345 end", "token <secret-hidden> end"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "<secret-hidden>"),
            ("glpat-abcdefghij0123456789", "<secret-hidden>"),
            ("id=AKIAIOSFODNN7EXAMPLE,", "id=<secret-hidden>,"),
            ("ASIAIOSFODNN7EXAMPLE", "<secret-hidden>"),
            ("xoxb-1234567890-abcdefghij", "<secret-hidden>"),
            ("sk_live_abcdefghij0123456789", "<secret-hidden>"),
            ("rk_live_abcdefghij0123456789", "<secret-hidden>"),
            ("OPENAI=sk-proj-abc123DEF456ghi789JKL0_-x", "OPENAI=<secret-hidden>"),
            ("sk-ant-api03-abcdefghij0123456789-xyz", "<secret-hidden>"),
            ("AIzaSyA-0123456789abcdefghijklmnopqrstu", "<secret-hidden>"),
            (
                "git https://x-access-token:hunter2hunter2@github.com/a",
                "git https://x-access-token:<secret-hidden>@github.com/a",
            ),
            ("postgres://user:pw@db:5432", "postgres://user:<secret-hidden>@db:5432"),
        ];
        for (text, want) in cases {
            assert_eq!(masked(&secrets, text), want, "{text}");
        }
        // Not credentials.
        for text in [
            "ghp_short",
            "task-0123456789abcdefghijklmn",
            "sk-learn-is-a-library-for-python",
            "https://example.com:8080/path@x",
            // (Another token: one masked already is masked again anywhere.)
            "mask ghp_0123456789abcdefghijABCDEFGHIJ012345 inside wordghp_9876543210abcdefghijABCDEFGHIJ012345",
        ] {
            let out = masked(&secrets, text);
            if text.starts_with("mask") {
                assert_eq!(out.matches(MASK).count(), 1, "{out}");
            } else {
                assert_eq!(out, text);
            }
        }
    }

    const PEM: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACBoZ2Fsb3c=\n-----END OPENSSH PRIVATE KEY-----\n$ ls\n";

    #[test]
    fn a_private_key_body_is_masked_line_by_line() {
        let secrets = Secrets::new([], true);
        assert_eq!(
            masked(&secrets, PEM),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n<secret-hidden>\n<secret-hidden>\n-----END OPENSSH PRIVATE KEY-----\n$ ls\n"
        );
        let public =
            "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0D\n-----END PUBLIC KEY-----\n";
        assert_eq!(masked(&secrets, public), public);
    }

    /// A small random generator with a fixed seed (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }

        /// A value of 8 to 28 characters: 8 fixed ones, then random.
        fn value(&mut self, alphabet: &[u8]) -> String {
            let head: String = (0..8).map(|_| alphabet[self.below(62)] as char).collect();
            head + &self.word(alphabet, 20)
        }

        /// Up to `max` random characters of `alphabet`.
        fn word(&mut self, alphabet: &[u8], max: usize) -> String {
            let len = self.below(max + 1);
            (0..len).map(|_| alphabet[self.below(alphabet.len())] as char).collect()
        }
    }

    /// Any split of any stream gives the same text as masking it whole:
    /// random secrets, embedded raw and encoded at random places among
    /// random text, shapes and PEM blocks, cut at random places (every
    /// byte, sometimes).
    #[test]
    fn any_split_masks_as_the_whole_does() {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let alphabet =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:/@ \n=+.%";
        for round in 0..300 {
            let values: Vec<String> = (0..1 + rng.below(4)).map(|_| rng.value(alphabet)).collect();
            let shapes = round % 2 == 0;
            let secrets = secrets(&values.iter().map(String::as_str).collect::<Vec<_>>(), shapes);
            let mut text = String::new();
            for _ in 0..rng.below(12) {
                text.push_str(&rng.word(alphabet, 30));
                let value = &values[rng.below(values.len())];
                let piece = match rng.below(11) {
                    10 => {
                        // Its base64 in a long text, wrapped at 64 or 76.
                        let long =
                            format!("{}{value}{}", rng.word(alphabet, 80), rng.word(alphabet, 80));
                        let encoded = base64(long.as_bytes());
                        let width = WRAP_COLUMNS[rng.below(2)];
                        let lines: Vec<&str> = encoded
                            .as_bytes()
                            .chunks(width)
                            .map(|l| std::str::from_utf8(l).expect("ascii"))
                            .collect();
                        format!("\n{}\n", lines.join(if rng.below(2) == 0 { "\n" } else { "\r\n" }))
                    }
                    9 => {
                        // Invisible characters anywhere in it.
                        let mut out = String::new();
                        for c in value.chars() {
                            out.push(c);
                            if rng.below(3) == 0 {
                                out.push(
                                    ["\u{200b}", "\x7f", "\u{34f}", "\u{feff}"][rng.below(4)]
                                        .chars()
                                        .next()
                                        .expect("one"),
                                );
                            }
                        }
                        out
                    }
                    0 => base64(format!("{}{value}", rng.word(alphabet, 2)).as_bytes()),
                    1 => url_encode(value),
                    2 => serde_json::to_string(value).expect("json"),
                    3 => value[..rng.below(value.len())].to_owned(),
                    4 => "ghp_0123456789abcdefghijABCDEFGHIJ012345".to_owned(),
                    5 => format!("https://u:{}x@h", rng.word(b"abc:", 5)),
                    6 => PEM.to_owned(),
                    7 => "-----BEGIN RSA PRIV".to_owned(),
                    _ => value.clone(),
                };
                text.push_str(&piece);
            }
            let whole = masked(&secrets, &text);
            let seen: String = text.chars().filter(|&c| !is_invisible(c)).collect();
            for value in &values {
                if seen.contains(value.as_str()) {
                    assert!(!whole.contains(value.as_str()), "{value:?} in {whole:?}");
                }
            }
            for attempt in 0..4 {
                let mut masker = StreamMasker::new();
                let mut out = String::new();
                let mut at = 0;
                while at < text.len() {
                    let mut step = if attempt == 0 { 1 } else { 1 + rng.below(12 * attempt) };
                    while !text.is_char_boundary((at + step).min(text.len())) {
                        step += 1;
                    }
                    let next = (at + step).min(text.len());
                    out.push_str(&masker.push(&secrets, &text[at..next], false).0);
                    at = next;
                }
                out.push_str(&masker.push(&secrets, "", true).0);
                assert_eq!(out, whole, "round {round}, attempt {attempt}: {text:?}");
            }
        }
    }

    #[test]
    fn the_hold_is_the_shortest_undecided_tail() {
        let secrets = secrets_with("abcdefghij");
        let mut masker = StreamMasker::new();
        assert_eq!(masker.push(&secrets, "xyz abc", false).0, "xyz ");
        assert_eq!(masker.push(&secrets, "def", false).0, "");
        assert_eq!(masker.push(&secrets, "ghij tail\n", false).0, "<secret-hidden> tail\n");
        assert!(!masker.holds());
        // Something that cannot begin a match is released at once.
        assert_eq!(masker.push(&secrets, "abx", false).0, "abx");
        // A preview shows the held text as far as it is decided, without
        // releasing it.
        assert_eq!(masker.push(&secrets, "abcde", false).0, "");
        assert_eq!(masker.preview(&secrets, "fghij").0, "<secret-hidden>");
        assert_eq!(masker.push(&secrets, "", true).0, "abcde");
    }

    /// What a person sees is masked: a value or a token with DEL or an
    /// invisible character inside is masked whole, the invisible characters
    /// with it; invisible characters elsewhere stay.
    #[test]
    fn invisible_characters_inside_a_secret_do_not_hide_it() {
        let secrets = Secrets::new([("X".to_owned(), TOKEN.to_owned())], true);
        for invisible in
            ['\x7f', '\u{200b}', '\u{2060}', '\u{feff}', '\u{34f}', '\u{ad}', '\u{e0041}']
        {
            let value = format!("s3cr{invisible}3t-Value_42!{invisible}{invisible}xyz");
            let text = format!("a{invisible} {value} b\u{200d}c");
            assert_eq!(masked(&secrets, &text), format!("a{invisible} <secret-hidden> b\u{200d}c"));
            let token = format!("ghp_{invisible}0123456789abcdefghijABCDEFGHIJ012345");
            assert_eq!(masked(&secrets, &format!("t={token}\n")), "t=<secret-hidden>\n");
            // Split anywhere, streamed.
            let mut masker = StreamMasker::new();
            let mut out = String::new();
            for c in text.chars() {
                out.push_str(&masker.push(&secrets, &c.to_string(), false).0);
            }
            out.push_str(&masker.push(&secrets, "", true).0);
            assert_eq!(out, masked(&secrets, &text));
        }
        // An invisible character before or after a secret is not masked.
        assert_eq!(
            masked(&secrets, &format!("\u{200b}{TOKEN}\u{200b}")),
            "\u{200b}<secret-hidden>\u{200b}"
        );
    }

    /// A value a shape masked is masked again wherever it comes later in
    /// the stream (`cat .env`: the password of `DATABASE_URL`, then
    /// `DB_PASSWORD` alone), whole or split anywhere.
    #[test]
    fn a_value_masked_by_its_shape_is_masked_again_later_in_the_stream() {
        let secrets = Secrets::new([], true);
        let env = "DATABASE_URL=postgres://app:Pa55-w0rd-42@host/db\nDB_PASSWORD=Pa55-w0rd-42\nX=Pa55-w0rd-4\n";
        let want = "DATABASE_URL=postgres://app:<secret-hidden>@host/db\nDB_PASSWORD=<secret-hidden>\nX=Pa55-w0rd-4\n";
        assert_eq!(masked(&secrets, env), want);
        for step in 1..8 {
            let mut masker = StreamMasker::new();
            let mut out = String::new();
            for piece in env.as_bytes().chunks(step) {
                out.push_str(
                    &masker.push(&secrets, std::str::from_utf8(piece).expect("ascii"), false).0,
                );
            }
            out.push_str(&masker.push(&secrets, "", true).0);
            assert_eq!(out, want, "in pieces of {step}");
        }
        // A short password is not learned (it would cut words), and what
        // came before is not changed.
        assert_eq!(
            masked(&secrets, "pw=hunter2 x://u:hunter2@h hunter2"),
            "pw=hunter2 x://u:<secret-hidden>@h hunter2"
        );
    }

    /// The base64 of a registered value, wrapped at 64 or 76 columns
    /// (`base64`, `openssl base64`, PEM), is masked wherever a line break
    /// falls in it, whole or streamed.
    #[test]
    fn wrapped_base64_of_a_value_is_masked() {
        let value = "wrapped-Secret-Value-0123456789-abcdefghijklmnop";
        let secrets = secrets_with(value);
        for width in WRAP_COLUMNS {
            for pad in 0..90 {
                let text = format!("{}{value}tail", "x".repeat(pad));
                let encoded = base64(text.as_bytes());
                let lines: Vec<&str> = encoded
                    .as_bytes()
                    .chunks(width)
                    .map(|l| std::str::from_utf8(l).expect("ascii"))
                    .collect();
                let wrapped = format!("$ base64\n{}\n$ ", lines.join("\n"));
                let out = masked(&secrets, &wrapped);
                // What is left of the value's encoding is what the bytes
                // around it decide.
                let left = out.replace(MASK, "").replace('\n', "").len();
                assert!(out.contains(MASK) && left <= wrapped.len() - 64, "{width} {pad}: {out}");
                let unmasked: String = base64_aligned(value.as_bytes(), pad % 3);
                assert!(!out.replace('\n', "").contains(&unmasked[4..unmasked.len() - 4]), "{out}");
                let mut masker = StreamMasker::new();
                let mut streamed = String::new();
                for piece in wrapped.as_bytes().chunks(5) {
                    let piece = std::str::from_utf8(piece).expect("ascii");
                    streamed.push_str(&masker.push(&secrets, piece, false).0);
                }
                streamed.push_str(&masker.push(&secrets, "", true).0);
                assert_eq!(streamed, out, "{width} {pad}");
            }
        }
    }

    /// A preview (a reply or progress message taken mid-line) shows at most
    /// the first 4 characters of a registered value whose line has not
    /// gone on, however much of it was printed; the line's end shows it
    /// masked.
    #[test]
    fn a_preview_shows_at_most_four_characters_of_an_unfinished_value() {
        let value = "preview-Secret-Value-0123456789-abcdefgh";
        let secrets = secrets_with(value);
        for len in 0..value.len() {
            let masker = StreamMasker::new();
            let line = format!("token: {}", &value[..len]);
            let (shown, _) = masker.preview(&secrets, &line);
            let visible = shown.len() - "token: ".len();
            assert!(visible <= PREVIEW_CHARS && shown.starts_with("token: "), "{len}: {shown}");
            // With an invisible character in it, the same.
            let (shown, _) = masker.preview(
                &secrets,
                &format!("{}\u{200b}{}", &line[..9.min(line.len())], &line[9.min(line.len())..]),
            );
            let raw: String = shown.chars().filter(|&c| !is_invisible(c)).collect();
            assert!(raw.len() <= "token: ".len() + PREVIEW_CHARS, "{len}: {shown:?}");
        }
        let (shown, masks) = StreamMasker::new().preview(&secrets, &format!("token: {value}\n"));
        assert_eq!((shown.as_str(), masks), ("token: <secret-hidden>\n", 1));
        // Text that begins no value is shown whole.
        assert_eq!(StreamMasker::new().preview(&secrets, "50% done").0, "50% done");
    }

    #[test]
    fn debug_shows_no_value() {
        let shown = format!("{:?}", secrets_with(TOKEN));
        assert!(!shown.contains("s3cr3t") && shown.contains("\"X\""), "{shown}");
    }

    #[test]
    fn nothing_to_mask_costs_no_copy() {
        let none = Secrets::none();
        let mut masker = StreamMasker::new();
        assert!(matches!(masker.push(&none, "plain", false).0, Cow::Borrowed("plain")));
        let some = secrets_with("abcdefghij");
        assert!(matches!(masker.push(&some, "plain\n", false).0, Cow::Borrowed("plain\n")));
    }
}
