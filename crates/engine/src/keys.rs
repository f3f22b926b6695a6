//! Key names an agent can send to a running program, and their bytes.
//!
//! The names are the ones the OpenHands terminal taught models: `C-c`,
//! `C-<letter>`, `UP`, `TAB`, `PGUP` and so on. This module only translates;
//! it does not write to the terminal.

/// The named keys, with the bytes a terminal sends for each.
const NAMED_KEYS: &[(&str, &[u8])] = &[
    ("ENTER", b"\r"),
    ("TAB", b"\t"),
    ("BS", b"\x7f"),
    ("ESC", b"\x1b"),
    ("UP", b"\x1b[A"),
    ("DOWN", b"\x1b[B"),
    ("RIGHT", b"\x1b[C"),
    ("LEFT", b"\x1b[D"),
    ("HOME", b"\x1b[H"),
    ("END", b"\x1b[F"),
    ("PGUP", b"\x1b[5~"),
    ("PGDN", b"\x1b[6~"),
    ("DEL", b"\x1b[3~"),
];

/// Other spellings models use for the same keys.
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
];

/// What input text for a running program turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A key: send these bytes as they are, with no Enter.
    Key {
        /// The canonical name, e.g. `C-c` or `UP`.
        name: String,
        /// The bytes to write.
        bytes: Vec<u8>,
    },
    /// Text to type, followed by Enter.
    Text(String),
}

/// Text that looks like a control key but is not a valid one (`C-1`,
/// `CTRL+F5`): sending it as literal text would surely not be what the
/// agent meant. The server words it, with [`names`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown key {text:?}")]
pub struct UnknownKey {
    /// The text as it was sent.
    pub text: String,
}

/// Reads `text` as a key name when it is one, as text otherwise; text
/// that looks like a control key but is not a valid one is an error.
pub fn parse(text: &str) -> Result<Input, UnknownKey> {
    let upper = text.trim().to_ascii_uppercase();
    let control = match upper.strip_prefix("CTRL-").or(upper.strip_prefix("CTRL+")) {
        Some(rest) => Some(rest),
        None if upper.len() == 2 && upper.starts_with('^') => Some(&upper[1..]),
        None => upper.strip_prefix("C-"),
    };
    if let Some(rest) = control {
        return match rest.as_bytes() {
            [letter @ b'A'..=b'Z'] => Ok(Input::Key {
                name: format!("C-{}", (*letter as char).to_ascii_lowercase()),
                bytes: vec![letter & 0x1f],
            }),
            [b @ (b'[' | b'\\' | b']' | b'^' | b'_' | b'@')] => {
                Ok(Input::Key { name: format!("C-{}", *b as char), bytes: vec![b & 0x1f] })
            }
            _ => Err(UnknownKey { text: text.to_owned() }),
        };
    }
    let canonical =
        ALIASES.iter().find(|(alias, _)| *alias == upper).map_or(upper.as_str(), |a| a.1);
    match NAMED_KEYS.iter().find(|(name, _)| *name == canonical) {
        Some((name, bytes)) => Ok(Input::Key { name: (*name).to_owned(), bytes: bytes.to_vec() }),
        None => Ok(Input::Text(text.to_owned())),
    }
}

/// The names of the named keys (besides `C-<letter>`), in a fixed order.
pub fn names() -> impl Iterator<Item = &'static str> {
    NAMED_KEYS.iter().map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, bytes: &[u8]) -> Result<Input, UnknownKey> {
        Ok(Input::Key { name: name.to_owned(), bytes: bytes.to_vec() })
    }

    #[test]
    fn key_names() {
        let cases: &[(&str, Result<Input, UnknownKey>)] = &[
            ("C-c", key("C-c", b"\x03")),
            ("c-C", key("C-c", b"\x03")),
            ("CTRL-d", key("C-d", b"\x04")),
            ("Ctrl+Z", key("C-z", b"\x1a")),
            ("^C", key("C-c", b"\x03")),
            ("C-[", key("C-[", b"\x1b")),
            ("UP", key("UP", b"\x1b[A")),
            ("pgdn", key("PGDN", b"\x1b[6~")),
            ("PageUp", key("PGUP", b"\x1b[5~")),
            ("ENTER", key("ENTER", b"\r")),
            ("BS", key("BS", b"\x7f")),
            ("hello", Ok(Input::Text("hello".into()))),
            ("  spaced  ", Ok(Input::Text("  spaced  ".into()))),
            ("Cat", Ok(Input::Text("Cat".into()))),
            ("YES", Ok(Input::Text("YES".into()))),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse(text), expected, "{text}");
        }
    }

    #[test]
    fn bad_control_keys_are_unknown_keys() {
        for text in ["C-1", "C-", "CTRL+F5", "C-ab"] {
            assert_eq!(parse(text), Err(UnknownKey { text: text.to_owned() }), "{text}");
        }
        assert!(names().any(|name| name == "PGUP"));
    }
}
