//! Input for a running program as a terminal sends it: text typed with
//! Enter, and lists of keys and text pieces with no Enter added, with the
//! bytes xterm sends for each key.
//!
//! Two ways in, each unambiguous:
//! - **Text** (the `command` of an input call) is text, whatever it says
//!   (`up`, `END`, `delete` reach pdb, gdb or psql as typed), plus Enter.
//!   Only the control keys models learnt from OpenHands are keys there:
//!   `C-c`, `C-d`, `C-z`, any `C-<letter>`, also spelt `^C`, `CTRL-C`,
//!   `Ctrl+C` ([`parse_input`]).
//! - **Keys** (a list, [`parse_keys`]): an item that is exactly an
//!   upper-case key name ([`names`], `C-<x>`, `M-<x>`) is that key; any
//!   other item is literal text; nothing is added. An item that looks like
//!   a key but is none (`F13`, `C-1`, `M-`, `Ctrl+C`, `RETURN`) is an
//!   error, never typed.
//!
//! Arrows, Home and End depend on the program's cursor-key mode (DECCKM,
//! tracked by the renderer): `ESC [ A` in normal mode, `ESC O A` in
//! application mode, as xterm sends them; so a key is kept by name until it
//! is sent ([`Input::bytes`]). This module only translates: it does not
//! write to the terminal.
//!
//! Bounds: a list holds at most [`MAX_KEYS`] items of at most
//! [`MAX_KEYS_BYTES`] bytes in all; a key is at most 6 bytes (Alt with F5).

/// The most items one list of keys may hold.
pub const MAX_KEYS: usize = 64;

/// The most bytes the items of one list may hold in all (as given: names
/// and text).
pub const MAX_KEYS_BYTES: usize = 4096;

/// How the program asked for the cursor keys (DECCKM, `ESC [ ? 1 h` and
/// `ESC [ ? 1 l`); curses programs ask for application mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CursorKeys {
    /// `ESC [ A` for Up (a terminal's default).
    #[default]
    Normal,
    /// `ESC O A` for Up.
    Application,
}

/// The named keys, with the bytes xterm sends for each. A cursor key's
/// bytes are its final letter (see [`Code::Cursor`]).
const NAMED_KEYS: &[(&str, Code)] = &[
    ("UP", Code::Cursor(b'A')),
    ("DOWN", Code::Cursor(b'B')),
    ("LEFT", Code::Cursor(b'D')),
    ("RIGHT", Code::Cursor(b'C')),
    ("HOME", Code::Cursor(b'H')),
    ("END", Code::Cursor(b'F')),
    ("PGUP", Code::Bytes(b"\x1b[5~")),
    ("PGDN", Code::Bytes(b"\x1b[6~")),
    ("INS", Code::Bytes(b"\x1b[2~")),
    ("DEL", Code::Bytes(b"\x1b[3~")),
    ("TAB", Code::Bytes(b"\t")),
    ("S-TAB", Code::Bytes(b"\x1b[Z")),
    ("ESC", Code::Bytes(b"\x1b")),
    ("BS", Code::Bytes(b"\x7f")),
    ("ENTER", Code::Bytes(b"\r")),
    ("SPACE", Code::Bytes(b" ")),
    ("F1", Code::Bytes(b"\x1bOP")),
    ("F2", Code::Bytes(b"\x1bOQ")),
    ("F3", Code::Bytes(b"\x1bOR")),
    ("F4", Code::Bytes(b"\x1bOS")),
    ("F5", Code::Bytes(b"\x1b[15~")),
    ("F6", Code::Bytes(b"\x1b[17~")),
    ("F7", Code::Bytes(b"\x1b[18~")),
    ("F8", Code::Bytes(b"\x1b[19~")),
    ("F9", Code::Bytes(b"\x1b[20~")),
    ("F10", Code::Bytes(b"\x1b[21~")),
    ("F11", Code::Bytes(b"\x1b[23~")),
    ("F12", Code::Bytes(b"\x1b[24~")),
];

/// Other upper-case spellings models use for named keys: in a list they
/// are errors that name the key meant, never text.
const ALIASES: &[(&str, &str)] = &[
    ("RETURN", "ENTER"),
    ("BACKSPACE", "BS"),
    ("BSPACE", "BS"),
    ("ESCAPE", "ESC"),
    ("PAGEUP", "PGUP"),
    ("PAGEDOWN", "PGDN"),
    ("PGDOWN", "PGDN"),
    ("PPAGE", "PGUP"),
    ("NPAGE", "PGDN"),
    ("DELETE", "DEL"),
    ("INSERT", "INS"),
    ("BTAB", "S-TAB"),
    ("BACKTAB", "S-TAB"),
];

/// What a key sends.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Code {
    /// These bytes, in every mode.
    Bytes(&'static [u8]),
    /// One byte (a control key, a character of a Meta key).
    Byte(u8),
    /// A character (the one of a Meta key), in UTF-8.
    Char(char),
    /// A cursor key with this final letter: `ESC [` or `ESC O` before it,
    /// by the cursor-key mode.
    Cursor(u8),
}

/// One key, by its canonical name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    name: String,
    /// Alt (Meta): an ESC before the key's bytes.
    meta: bool,
    code: Code,
}

impl Key {
    /// The canonical name: `UP`, `C-c`, `M-x`, `M-ENTER`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bytes xterm sends for the key in cursor-key mode `mode`.
    pub fn bytes(&self, mode: CursorKeys) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(7);
        if self.meta {
            bytes.push(0x1b);
        }
        match &self.code {
            Code::Bytes(code) => bytes.extend_from_slice(code),
            Code::Byte(byte) => bytes.push(*byte),
            Code::Char(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            Code::Cursor(letter) => {
                let introducer = match mode {
                    CursorKeys::Normal => b'[',
                    CursorKeys::Application => b'O',
                };
                bytes.extend_from_slice(&[0x1b, introducer, *letter]);
            }
        }
        bytes
    }

    /// A named key (`UP`, `F5`), or a control key (`C-c`): by its exact
    /// name.
    fn named(name: &str) -> Option<Key> {
        if let Some((name, code)) = NAMED_KEYS.iter().find(|(key, _)| *key == name) {
            return Some(Key { name: (*name).to_owned(), meta: false, code: code.clone() });
        }
        control(name.strip_prefix("C-")?)
    }
}

/// The control key for the character after `C-`: a letter (either case)
/// or one of `[ \ ] ^ _ @`; named `C-` and the letter in lower case.
fn control(rest: &str) -> Option<Key> {
    let byte = match rest.as_bytes() {
        [letter] if letter.is_ascii_alphabetic() => letter.to_ascii_lowercase(),
        [b @ (b'[' | b'\\' | b']' | b'^' | b'_' | b'@')] => *b,
        _ => return None,
    };
    Some(Key { name: format!("C-{}", byte as char), meta: false, code: Code::Byte(byte & 0x1f) })
}

/// One item of a list of keys: a key, or text typed as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A key.
    Key(Key),
    /// Text, typed as it is (no Enter).
    Text(String),
}

/// Input for a running program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Text to type, followed by Enter.
    Text(String),
    /// Keys and text, sent in order with nothing added; a control key sent
    /// on its own is a list of one.
    Keys(Vec<Piece>),
}

impl Input {
    /// The input of one key alone.
    pub fn key(key: Key) -> Input {
        Input::Keys(vec![Piece::Key(key)])
    }

    /// The bytes to write, with cursor keys in mode `mode`.
    pub fn bytes(&self, mode: CursorKeys) -> Vec<u8> {
        match self {
            Input::Text(text) => {
                let mut bytes = text.as_bytes().to_vec();
                bytes.push(b'\r');
                bytes
            }
            Input::Keys(pieces) => pieces
                .iter()
                .flat_map(|piece| match piece {
                    Piece::Key(key) => key.bytes(mode),
                    Piece::Text(text) => text.as_bytes().to_vec(),
                })
                .collect(),
        }
    }

    /// Whether the input's bytes depend on the cursor-key mode (it has an
    /// arrow, Home or End).
    pub fn follows_cursor_mode(&self) -> bool {
        matches!(self, Input::Keys(pieces) if pieces.iter().any(|piece| {
            matches!(piece, Piece::Key(Key { code: Code::Cursor(_), .. }))
        }))
    }

    /// The name of the key, when the input is exactly one key.
    pub fn single_key(&self) -> Option<&str> {
        match self {
            Input::Keys(pieces) => match pieces.as_slice() {
                [Piece::Key(key)] => Some(key.name()),
                _ => None,
            },
            Input::Text(_) => None,
        }
    }

    /// Whether any of the input's keys is named `name`.
    pub fn has_key(&self, name: &str) -> bool {
        matches!(self, Input::Keys(pieces)
            if pieces.iter().any(|piece| matches!(piece, Piece::Key(key) if key.name() == name)))
    }

    /// What a list of keys sent, for a reply or a log, without its text
    /// (which may be a password): the keys' names in order, separated by
    /// spaces, with each piece of text as `text(N)`, N its characters (`ESC
    /// text(3) ENTER`). `None` for text typed with Enter.
    pub fn describe(&self) -> Option<String> {
        let Input::Keys(pieces) = self else { return None };
        let names: Vec<String> = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Key(key) => key.name().to_owned(),
                Piece::Text(text) => format!("text({})", text.chars().count()),
            })
            .collect();
        Some(names.join(" "))
    }

    /// Bytes of text in the input (without keys and without the Enter).
    pub fn text_bytes(&self) -> usize {
        match self {
            Input::Text(text) => text.len(),
            Input::Keys(pieces) => pieces
                .iter()
                .map(|piece| match piece {
                    Piece::Text(text) => text.len(),
                    Piece::Key(_) => 0,
                })
                .sum(),
        }
    }
}

/// Why input could not be read. The server words it, with [`names`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Text that looks like a key but is none (`C-1`, `F13`, `M-`): sending
    /// it as literal text would surely not be what the agent meant.
    #[error("unknown key {0:?}")]
    Unknown(String),
    /// In a list, another spelling of a key (`Ctrl+C`, `^C`, `RETURN`): the
    /// key's name.
    #[error("{text:?} is written {name} in a list of keys")]
    Spelling {
        /// The item as it was sent.
        text: String,
        /// The key's name.
        name: String,
    },
    /// An empty item in a list (it would send nothing).
    #[error("item {0} of the list of keys is empty")]
    Empty(usize),
    /// A list with more than [`MAX_KEYS`] items.
    #[error("{0} keys, more than {MAX_KEYS}")]
    TooMany(usize),
    /// A list with more than [`MAX_KEYS_BYTES`] bytes.
    #[error("{0} bytes of keys, more than {MAX_KEYS_BYTES}")]
    TooLong(usize),
}

/// The control key a text spells in any of the ways OpenHands accepts
/// (`C-c`, `c-C`, `^C`, `CTRL-C`, `Ctrl+C`, in any case): `None` when it is
/// no such spelling, an error when it is one with no valid key (`C-1`,
/// `CTRL+F5`).
pub fn control_key(text: &str) -> Option<Result<Key, KeyError>> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = match upper.strip_prefix("CTRL-").or(upper.strip_prefix("CTRL+")) {
        Some(rest) => rest,
        None if upper.len() == 2 && upper.starts_with('^') => &upper[1..],
        None => upper.strip_prefix("C-")?,
    };
    Some(control(rest).ok_or_else(|| KeyError::Unknown(text.to_owned())))
}

/// Reads text sent as input: a control key when it spells one (see
/// [`control_key`]), text to type with Enter otherwise; text that spells a
/// control key with no valid key is an error.
pub fn parse_input(text: &str) -> Result<Input, KeyError> {
    match control_key(text) {
        Some(key) => key.map(Input::key),
        None => Ok(Input::Text(text.to_owned())),
    }
}

/// Reads a list of keys: each item that is exactly a key's name is that
/// key, any other item is text typed as it is; items that look like keys
/// but are none, empty items, and lists past the bounds are errors.
pub fn parse_keys(items: &[String]) -> Result<Input, KeyError> {
    if items.len() > MAX_KEYS {
        return Err(KeyError::TooMany(items.len()));
    }
    let bytes: usize = items.iter().map(String::len).sum();
    if bytes > MAX_KEYS_BYTES {
        return Err(KeyError::TooLong(bytes));
    }
    let pieces = items
        .iter()
        .enumerate()
        .map(|(at, item)| piece(item).map_err(|err| err.unwrap_or(KeyError::Empty(at + 1))))
        .collect::<Result<_, _>>()?;
    Ok(Input::Keys(pieces))
}

/// One item of a list; `Err(None)` for an empty one.
fn piece(item: &str) -> Result<Piece, Option<KeyError>> {
    if item.is_empty() {
        return Err(None);
    }
    if let Some(key) = Key::named(item) {
        return Ok(Piece::Key(key));
    }
    if let Some(rest) = item.strip_prefix("M-") {
        let mut chars = rest.chars();
        let key = match (chars.next(), chars.next()) {
            (Some(c), None) => Some(Key { name: item.to_owned(), meta: true, code: Code::Char(c) }),
            _ => Key::named(rest).map(|key| Key { name: item.to_owned(), meta: true, ..key }),
        };
        return key.map(Piece::Key).ok_or_else(|| Some(KeyError::Unknown(item.to_owned())));
    }
    if looks_like_a_key(item) {
        return Err(Some(KeyError::Unknown(item.to_owned())));
    }
    match another_spelling(item) {
        Some(Ok(name)) => Err(Some(KeyError::Spelling { text: item.to_owned(), name })),
        Some(Err(err)) => Err(Some(err)),
        None => Ok(Piece::Text(item.to_owned())),
    }
}

/// An upper-case key shape with no key: `C-` or `S-` with anything but a
/// key after it, `F` with a number other than 1 to 12.
fn looks_like_a_key(item: &str) -> bool {
    let function_key = item
        .strip_prefix('F')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    function_key || item.starts_with("C-") || item.starts_with("S-")
}

/// The key an item names in another spelling: a control key written as
/// OpenHands accepts it but not as `C-<x>` (`Ctrl+C`, `^C`, `c-c`), or an
/// upper-case alias of a named key (`RETURN`, `PAGEDOWN`). `CTRL-` or
/// `CTRL+` (in any case) with no control key after it is an unknown key.
fn another_spelling(item: &str) -> Option<Result<String, KeyError>> {
    match control_key(item) {
        Some(Ok(key)) if item.trim() == item => return Some(Ok(key.name().to_owned())),
        Some(Err(err)) if item.to_ascii_uppercase().starts_with("CTRL") => return Some(Err(err)),
        _ => {}
    }
    let alias = ALIASES.iter().find(|(alias, _)| *alias == item);
    alias.map(|(_, name)| Ok((*name).to_owned()))
}

/// The key that text sent with Enter names, when it is exactly an
/// upper-case key name or alias (`UP`, `ENTER`, `PAGEDOWN`): such text is
/// typed as text, and the reply can say how to send the key.
pub fn names_a_key(text: &str) -> Option<&'static str> {
    let name = ALIASES.iter().find(|(alias, _)| *alias == text).map_or(text, |(_, name)| name);
    NAMED_KEYS.iter().find(|(key, _)| *key == name).map(|(key, _)| *key)
}

/// The names of the named keys (besides `C-<x>` and `M-<x>`), in a fixed
/// order.
pub fn names() -> impl Iterator<Item = &'static str> {
    NAMED_KEYS.iter().map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    use CursorKeys::{Application, Normal};

    fn list(items: &[&str]) -> Result<Input, KeyError> {
        parse_keys(&items.iter().map(|item| (*item).to_owned()).collect::<Vec<_>>())
    }

    /// The bytes of a list in both modes, or its error.
    fn sent(items: &[&str]) -> Result<(Vec<u8>, Vec<u8>), KeyError> {
        list(items).map(|input| (input.bytes(Normal), input.bytes(Application)))
    }

    /// Every key name, with xterm's bytes in normal and application mode.
    const EVERY_KEY: &[(&str, &[u8], &[u8])] = &[
        ("UP", b"\x1b[A", b"\x1bOA"),
        ("DOWN", b"\x1b[B", b"\x1bOB"),
        ("LEFT", b"\x1b[D", b"\x1bOD"),
        ("RIGHT", b"\x1b[C", b"\x1bOC"),
        ("HOME", b"\x1b[H", b"\x1bOH"),
        ("END", b"\x1b[F", b"\x1bOF"),
        ("PGUP", b"\x1b[5~", b"\x1b[5~"),
        ("PGDN", b"\x1b[6~", b"\x1b[6~"),
        ("INS", b"\x1b[2~", b"\x1b[2~"),
        ("DEL", b"\x1b[3~", b"\x1b[3~"),
        ("TAB", b"\t", b"\t"),
        ("S-TAB", b"\x1b[Z", b"\x1b[Z"),
        ("ESC", b"\x1b", b"\x1b"),
        ("BS", b"\x7f", b"\x7f"),
        ("ENTER", b"\r", b"\r"),
        ("SPACE", b" ", b" "),
        ("F1", b"\x1bOP", b"\x1bOP"),
        ("F2", b"\x1bOQ", b"\x1bOQ"),
        ("F3", b"\x1bOR", b"\x1bOR"),
        ("F4", b"\x1bOS", b"\x1bOS"),
        ("F5", b"\x1b[15~", b"\x1b[15~"),
        ("F6", b"\x1b[17~", b"\x1b[17~"),
        ("F7", b"\x1b[18~", b"\x1b[18~"),
        ("F8", b"\x1b[19~", b"\x1b[19~"),
        ("F9", b"\x1b[20~", b"\x1b[20~"),
        ("F10", b"\x1b[21~", b"\x1b[21~"),
        ("F11", b"\x1b[23~", b"\x1b[23~"),
        ("F12", b"\x1b[24~", b"\x1b[24~"),
    ];

    #[test]
    fn every_named_key_sends_what_xterm_sends_in_both_modes() {
        assert_eq!(names().collect::<Vec<_>>(), EVERY_KEY.iter().map(|k| k.0).collect::<Vec<_>>());
        for (name, normal, application) in EVERY_KEY {
            assert_eq!(sent(&[name]), Ok((normal.to_vec(), application.to_vec())), "{name}");
            // With Alt: an ESC first.
            let meta = format!("M-{name}");
            let with_escape = |bytes: &[u8]| [b"\x1b", bytes].concat();
            assert_eq!(
                sent(&[&meta]),
                Ok((with_escape(normal), with_escape(application))),
                "{meta}"
            );
            let input = list(&[name]).expect("a key");
            assert_eq!(input.single_key(), Some(*name));
            assert_eq!(input.follows_cursor_mode(), normal != application, "{name}");
            let meta = list(&[&meta]).expect("a key");
            assert_eq!(meta.follows_cursor_mode(), normal != application, "{meta:?}");
            assert_eq!(input.describe().as_deref(), Some(*name));
            // The same name in lower case is text.
            let lower = name.to_ascii_lowercase();
            assert_eq!(list(&[&lower]), Ok(Input::Keys(vec![Piece::Text(lower.clone())])));
        }
    }

    #[test]
    fn control_and_meta_keys() {
        let same = |bytes: &[u8]| Ok((bytes.to_vec(), bytes.to_vec()));
        for letter in b'a'..=b'z' {
            let (lower, upper) = (letter as char, letter.to_ascii_uppercase() as char);
            assert_eq!(sent(&[&format!("C-{lower}")]), same(&[letter - b'a' + 1]));
            let input = list(&[&format!("C-{upper}")]).expect("a key");
            assert_eq!(input.single_key(), Some(format!("C-{lower}").as_str()), "C-{upper}");
            assert_eq!(sent(&[&format!("M-{lower}")]), same(&[0x1b, letter]));
            assert_eq!(sent(&[&format!("M-{upper}")]), same(&[0x1b, letter - 32]));
        }
        let cases: &[(&str, &[u8], &str)] = &[
            ("C-[", b"\x1b", "C-["),
            ("C-\\", b"\x1c", "C-\\"),
            ("C-]", b"\x1d", "C-]"),
            ("C-^", b"\x1e", "C-^"),
            ("C-_", b"\x1f", "C-_"),
            ("C-@", b"\x00", "C-@"),
            ("M-C-c", b"\x1b\x03", "M-C-c"),
            ("M-.", b"\x1b.", "M-."),
            ("M- ", b"\x1b ", "M- "),
            ("M-é", "\x1bé".as_bytes(), "M-é"),
            ("M-SPACE", b"\x1b ", "M-SPACE"),
            ("M-ENTER", b"\x1b\r", "M-ENTER"),
            ("M-BS", b"\x1b\x7f", "M-BS"),
        ];
        for (item, bytes, name) in cases {
            assert_eq!(sent(&[item]), same(bytes), "{item}");
            assert_eq!(list(&[item]).expect("a key").single_key(), Some(*name), "{item}");
        }
    }

    #[test]
    fn other_items_are_text_typed_as_they_are() {
        let cases: &[(&[&str], &[u8])] = &[
            (&["q"], b"q"),
            (&["up"], b"up"),
            (&["Up", "end", "Enter", "delete", "return"], b"UpendEnterdeletereturn"),
            (&[":wq", "ENTER"], b":wq\r"),
            (&["  spaced  "], b"  spaced  "),
            (&["two\nlines"], b"two\nlines"),
            (&["YES", "OK", "F", "FF", "F1X", "C", "M", "S", "CTRL"], b"YESOKFFFF1XCMSCTRL"),
            (&["m-x", "s-tab", "f5", "Esc"], b"m-xs-tabf5Esc"),
            (&["x-1", "A-b", "F 1", " UP", "UP "], b"x-1A-bF 1 UPUP "),
            (&["ESC", ":q!", "ENTER"], b"\x1b:q!\r"),
        ];
        for (items, bytes) in cases {
            assert_eq!(sent(items), Ok((bytes.to_vec(), bytes.to_vec())), "{items:?}");
        }
        let arrows = (b"\x1b[Bx\x1b[B\r".to_vec(), b"\x1bOBx\x1bOB\r".to_vec());
        assert_eq!(sent(&["DOWN", "x", "DOWN", "ENTER"]), Ok(arrows));
        let input = list(&["ESC", ":wq", "ENTER", "héllo"]).expect("keys");
        assert_eq!(input.describe().as_deref(), Some("ESC text(3) ENTER text(5)"));
        assert_eq!(input.single_key(), None);
        assert_eq!(input.text_bytes(), 9);
        assert!(input.has_key("ENTER") && !input.has_key("C-c"));
    }

    #[test]
    fn items_that_look_like_keys_are_errors() {
        let unknown = |text: &str| Err(KeyError::Unknown(text.to_owned()));
        for item in [
            "F0", "F13", "F99", "F012", "C-", "C-1", "C-ab", "C-UP", "C- ", "M-", "M-xy", "M-F13",
            "M-M-x", "M-C-1", "S-", "S-UP", "S-x",
        ] {
            assert_eq!(list(&["ok", item]), unknown(item), "{item}");
        }
        let spelling = |text: &str, name: &str| {
            Err(KeyError::Spelling { text: text.into(), name: name.into() })
        };
        for (item, name) in [
            ("Ctrl+C", "C-c"),
            ("CTRL-d", "C-d"),
            ("ctrl-z", "C-z"),
            ("^C", "C-c"),
            ("^x", "C-x"),
            ("c-c", "C-c"),
            ("RETURN", "ENTER"),
            ("ESCAPE", "ESC"),
            ("PAGEDOWN", "PGDN"),
            ("DELETE", "DEL"),
            ("BACKSPACE", "BS"),
            ("INSERT", "INS"),
            ("BTAB", "S-TAB"),
        ] {
            assert_eq!(list(&[item]), spelling(item, name), "{item}");
        }
        for item in ["Ctrl+F5", "CTRL-", "ctrl+1"] {
            assert_eq!(list(&[item]), unknown(item), "{item}");
        }
        // Lower-case aliases are text, as lower-case names are; so are
        // words that only start like a control key.
        let text = ["return", "delete", "^", "c-3po", "^1", " C-c", "CTRL"];
        assert_eq!(sent(&text).map(|b| b.0), Ok(b"returndelete^c-3po^1 C-cCTRL".to_vec()));
    }

    #[test]
    fn lists_are_bounded() {
        let many = vec!["x".to_owned(); MAX_KEYS];
        assert!(parse_keys(&many).is_ok());
        let more = vec!["x".to_owned(); MAX_KEYS + 1];
        assert_eq!(parse_keys(&more), Err(KeyError::TooMany(MAX_KEYS + 1)));
        let long = vec!["y".repeat(MAX_KEYS_BYTES)];
        assert!(parse_keys(&long).is_ok());
        let longer = vec!["y".repeat(MAX_KEYS_BYTES), "z".to_owned()];
        assert_eq!(parse_keys(&longer), Err(KeyError::TooLong(MAX_KEYS_BYTES + 1)));
        assert_eq!(list(&["a", ""]), Err(KeyError::Empty(2)));
        // The longest key: Alt with a function key.
        let longest = EVERY_KEY.iter().map(|k| k.1.len().max(k.2.len())).max();
        assert_eq!(longest, Some(5));
        assert_eq!(list(&["M-F12"]).map(|input| input.bytes(Normal).len()), Ok(6));
    }

    #[test]
    fn input_text_is_text_but_control_keys() {
        let key = |name: &str, byte: u8| {
            let input = parse_input(name).expect("a key");
            assert_eq!(input.bytes(Normal), vec![byte], "{name}");
            input.single_key().map(str::to_owned)
        };
        assert_eq!(key("C-c", 3).as_deref(), Some("C-c"));
        assert_eq!(key("c-C", 3).as_deref(), Some("C-c"));
        assert_eq!(key("CTRL-d", 4).as_deref(), Some("C-d"));
        assert_eq!(key("Ctrl+Z", 0x1a).as_deref(), Some("C-z"));
        assert_eq!(key("^C", 3).as_deref(), Some("C-c"));
        assert_eq!(key(" C-c ", 3).as_deref(), Some("C-c"));
        assert_eq!(key("C-[", 0x1b).as_deref(), Some("C-["));
        for text in [
            "up",
            "down",
            "end",
            "tab",
            "return",
            "delete",
            "UP",
            "END",
            "Up",
            "ENTER",
            "ESC",
            "BS",
            "PGDN",
            "F5",
            "M-x",
            "hello",
            "  spaced  ",
            "Cat",
            "YES",
            "",
        ] {
            let input = parse_input(text).expect("text");
            assert_eq!(input, Input::Text(text.to_owned()), "{text}");
            assert_eq!(input.bytes(Application), format!("{text}\r").into_bytes());
            assert_eq!((input.single_key(), input.describe()), (None, None));
        }
        for text in ["C-1", "C-", "CTRL+F5", "C-ab", "^1"] {
            assert_eq!(parse_input(text), Err(KeyError::Unknown(text.to_owned())), "{text}");
        }
    }

    #[test]
    fn text_that_names_a_key_is_told_apart() {
        assert_eq!(names_a_key("UP"), Some("UP"));
        assert_eq!(names_a_key("RETURN"), Some("ENTER"));
        assert_eq!(names_a_key("F12"), Some("F12"));
        for text in ["up", "Up", "UP ", "C-c", "hello"] {
            assert_eq!(names_a_key(text), None, "{text}");
        }
    }
}
