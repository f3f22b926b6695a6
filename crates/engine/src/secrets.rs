//! Where secrets come from: the values the server must never show, each
//! with the name it came under, ready for the masker. Three sources, in
//! this order ([`load`]): named variables of the server's environment, a
//! private secrets file in dotenv syntax ([`read_file`], [`parse`]), and by
//! default the variables whose names say secret ([`name_says_secret`]).
//!
//! Not here: masking (`mask`), exporting the file's values into shells and
//! `run` commands (their callers do, through the environment only), or
//! printing anything.
//!
//! Invariant: no message ever contains a value, and no value shorter than
//! [`MIN_SECRET_LEN`] characters is taken (masking `user` would cut words
//! in half): a named or file value that short is an error naming it; a
//! variable found by its name is skipped with a notice.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::private_fs;

/// The fewest characters a secret may have.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// The largest secrets file read: a file of credentials is small; a big
/// one is a mistake (the wrong file named).
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// Names the secrets file may not set: the shell and shellkeep rely on
/// them (the integration sends `PATH` with its state; the others change
/// how the shell starts or prompts). Names starting with `SHELLKEEP_`,
/// `BASH_FUNC_` or `__sk` are refused too.
const RESERVED_NAMES: &[&str] =
    &["PATH", "TERM", "PROMPT_COMMAND", "PS1", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS"];

/// Variables whose names look secret but whose values are not: a path to a
/// credentials file (Google's), read by programs, and shown by them.
const NOT_SECRET_NAMES: &[&str] = &["GOOGLE_APPLICATION_CREDENTIALS"];

/// Last words of a name that say its value is *about* a secret, not the
/// secret itself: `PASSWORD_FILE`, `TOKEN_URL`, `GPG_KEY_ID`,
/// `PASSWORD_STORE_DIR`, `CREDENTIALS_DIRECTORY`, `PASSWORD_COMMAND`.
const NOT_SECRET_LAST_WORDS: &[&str] = &[
    "FILE",
    "FILES",
    "PATH",
    "DIR",
    "DIRECTORY",
    "SOCK",
    "SOCKET",
    "ID",
    "URL",
    "NAME",
    "USER",
    "USERNAME",
    "HOST",
    "PORT",
    "COMMAND",
    "CMD",
    "HELPER",
];

/// Where to look, as the server's flags say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// Variables of the server's environment whose values are secret.
    pub names: Vec<String>,
    /// Where `names` were given (`--secret or SHELLKEEP_SECRETS`), said in
    /// errors about them; empty: nothing is said.
    pub names_from: String,
    /// A file of `NAME=value` lines whose values are secret and exported.
    pub file: Option<PathBuf>,
    /// Whether variables whose names say secret, and the shapes of
    /// well-known credentials, are masked too.
    pub defaults: bool,
}

/// Where one secret came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A variable named as secret.
    Named,
    /// The secrets file.
    File,
    /// A variable whose name says secret.
    NamePattern,
}

/// One value to mask. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The variable's name.
    pub name: String,
    /// The value, at least [`MIN_SECRET_LEN`] characters.
    pub value: String,
    /// Where it came from.
    pub origin: Origin,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("value", &format_args!("<{} characters>", self.value.chars().count()))
            .field("origin", &self.origin)
            .finish()
    }
}

/// Every secret found, and what to tell the user about the ones skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The values to mask: named ones, then the file's, then those found by
    /// name; one entry per name.
    pub secrets: Vec<Secret>,
    /// Whether the masker also masks the shapes of well-known credentials.
    pub shapes: bool,
    /// Variables whose names say secret but that were skipped (empty, too
    /// short, not UTF-8), one sentence each, naming the variable only.
    pub notices: Vec<String>,
}

impl Found {
    /// The `(name, value)` pairs the masker takes.
    pub fn masked(&self) -> Vec<(String, String)> {
        self.secrets.iter().map(|s| (s.name.clone(), s.value.clone())).collect()
    }

    /// The `(name, value)` pairs put into the environment of every shell
    /// and `run` command: the secrets file's.
    pub fn exported(&self) -> Vec<(String, String)> {
        self.secrets
            .iter()
            .filter(|s| s.origin == Origin::File)
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect()
    }
}

/// A source that cannot be used; the message says which and how to fix
/// it, and never contains a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretsError(pub String);

/// Finds the secrets `sources` name in the server's environment `env` and
/// in the secrets file: the variables named as secret, then the file's
/// values, then (with the defaults) variables whose names say secret.
pub fn load(sources: &Sources, env: &[(OsString, OsString)]) -> Result<Found, SecretsError> {
    let mut found = Found { shapes: sources.defaults, ..Found::default() };
    add_named(sources, env, &mut found)?;
    if let Some(path) = &sources.file {
        add_file(path, &mut found)?;
    }
    if sources.defaults {
        add_by_name_pattern(env, &mut found);
    }
    Ok(found)
}

/// The variables `sources` names as secret, from `env`; each must exist and
/// be maskable.
fn add_named(
    sources: &Sources,
    env: &[(OsString, OsString)],
    found: &mut Found,
) -> Result<(), SecretsError> {
    let lookup = |name: &str| env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_os_str());
    for name in sources.names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let what = match sources.names_from.as_str() {
            "" => format!("secret {name}"),
            from => format!("secret {name} (from {from})"),
        };
        if !is_name(name) {
            return Err(SecretsError(format!(
                "{what}: not a variable name (letters, digits and `_`, not starting with a digit)"
            )));
        }
        if found.secrets.iter().any(|s| s.name == name) {
            continue;
        }
        let Some(value) = lookup(name) else {
            return Err(SecretsError(format!(
                "{what}: the server's environment has no variable {name}"
            )));
        };
        let value = value.to_str().ok_or_else(|| {
            SecretsError(format!("{what}: its value is not valid UTF-8, which cannot be masked"))
        })?;
        if let Some(problem) = too_short(value) {
            return Err(SecretsError(format!("{what}: {problem}")));
        }
        found.secrets.push(Secret {
            name: name.to_owned(),
            value: value.to_owned(),
            origin: Origin::Named,
        });
    }
    Ok(())
}

/// The values of the secrets file at `path`; each must be maskable.
fn add_file(path: &Path, found: &mut Found) -> Result<(), SecretsError> {
    for entry in read_file(path)? {
        if let Some(problem) = too_short(&entry.value) {
            return Err(SecretsError(format!(
                "{} line {}: {}: {problem}",
                path.display(),
                entry.line,
                entry.name
            )));
        }
        // A file value exported under a name also named as secret
        // replaces that variable in commands: both values are masked.
        found.secrets.push(Secret { name: entry.name, value: entry.value, origin: Origin::File });
    }
    Ok(())
}

/// The variables of `env` whose names say secret, not yet found by name; one
/// that cannot be masked is a notice, not an error.
fn add_by_name_pattern(env: &[(OsString, OsString)], found: &mut Found) {
    let mut names: Vec<(&OsStr, &OsStr)> =
        env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())).collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    names.dedup_by(|a, b| a.0 == b.0);
    for (name, value) in names {
        let Some(name) = name.to_str().filter(|n| name_says_secret(n)) else { continue };
        if found.secrets.iter().any(|s| s.name == name && s.origin != Origin::File) {
            continue;
        }
        let Some(value) = value.to_str() else {
            found.notices.push(format!(
                "the environment variable {name} looks secret by its name, but its value is \
                 not valid UTF-8: it is not masked"
            ));
            continue;
        };
        if let Some(problem) = too_short(value) {
            found.notices.push(format!(
                "the environment variable {name} looks secret by its name, but {problem}: it \
                 is not masked"
            ));
            continue;
        }
        found.secrets.push(Secret {
            name: name.to_owned(),
            value: value.to_owned(),
            origin: Origin::NamePattern,
        });
    }
}

/// Why `value` cannot be masked, if it cannot.
fn too_short(value: &str) -> Option<String> {
    if value.is_empty() {
        Some("its value is empty".to_owned())
    } else if value.chars().count() < MIN_SECRET_LEN {
        Some(format!(
            "its value is shorter than {MIN_SECRET_LEN} characters, too short to mask without \
             wrecking ordinary output"
        ))
    } else {
        None
    }
}

/// Whether `name` is a variable name: letters, digits and `_`, not
/// starting with a digit.
pub(crate) fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether the name of an environment variable says its value is secret
/// (case does not matter; words are separated by `_`):
/// - a word `TOKEN`, `SECRET`, `SECRETS` or `PASSPHRASE` anywhere
///   (`GITHUB_TOKEN`, `TF_TOKEN_app_terraform_io`, `AWS_SECRET_ACCESS_KEY`,
///   `SECRET_KEY_BASE`, `CLIENT_SECRET`);
/// - `PASSWORD`, `PASSWD`, `CREDENTIAL`, `APIKEY` anywhere, even inside a
///   word (`PGPASSWORD`, `DB_PASSWD`, `AZURE_CREDENTIALS`, `OPENAI_APIKEY`);
/// - a last word `KEY`, `PAT`, `PWD` or `PASS` after another word
///   (`OPENAI_API_KEY`, `STRIPE_KEY`, `GITHUB_PAT`, `MYSQL_PWD`,
///   `SMTP_PASS`), never alone: `KEY`, `PWD` (the working directory).
///
/// Not secret, whatever the rest: a name starting with `SHELLKEEP_` (our
/// own settings); a word `PUBLIC` or `PUBLISHABLE` (`SSH_PUBLIC_KEY`,
/// `NEXT_PUBLIC_MAPS_KEY`, `STRIPE_PUBLISHABLE_KEY` are meant to be seen);
/// a last word naming where or who rather than what (`FILE`, `PATH`, `DIR`,
/// `DIRECTORY`, `SOCK`, `SOCKET`, `ID`, `URL`, `NAME`, `USER`, `USERNAME`,
/// `HOST`, `PORT`, `COMMAND`, `CMD`, `HELPER`: `GPG_KEY_ID`,
/// `PASSWORD_STORE_DIR`, `AWS_SHARED_CREDENTIALS_FILE`); and
/// `GOOGLE_APPLICATION_CREDENTIALS` (a path). `SSH_AUTH_SOCK`, `OLDPWD`
/// and `TOKENIZERS_PARALLELISM` match nothing.
pub(crate) fn name_says_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("SHELLKEEP_") || NOT_SECRET_NAMES.contains(&upper.as_str()) {
        return false;
    }
    let words: Vec<&str> = upper.split('_').filter(|w| !w.is_empty()).collect();
    let Some(last) = words.last() else { return false };
    if NOT_SECRET_LAST_WORDS.contains(last)
        || words.iter().any(|w| matches!(*w, "PUBLIC" | "PUBLISHABLE"))
    {
        return false;
    }
    words.iter().any(|w| matches!(*w, "TOKEN" | "SECRET" | "SECRETS" | "PASSPHRASE"))
        || ["PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY"].iter().any(|part| upper.contains(part))
        || (words.len() >= 2 && matches!(*last, "KEY" | "PAT" | "PWD" | "PASS"))
}

/// One `NAME=value` of a secrets file.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The variable's name.
    pub name: String,
    /// Its value, unquoted and unescaped.
    pub value: String,
    /// The line it starts on (1-based).
    pub line: usize,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=<{} characters> (line {})", self.name, self.value.chars().count(), self.line)
    }
}

/// Opens the secrets file `path` safely, checks that it is private to us,
/// and parses it: opened without following a symlink (`O_NOFOLLOW`), it
/// must be a regular file of ours that nobody else may read or write.
/// Values are taken literally: no `$VAR` expansion.
pub(crate) fn read_file(path: &Path) -> Result<Vec<Entry>, SecretsError> {
    let shown = path.display();
    let file = File::options()
        .read(true)
        // Never through a symlink; a FIFO must not block start-up.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| {
            if err.raw_os_error() == Some(libc::ELOOP) {
                SecretsError(format!(
                    "the secrets file {shown} is a symbolic link, which is refused (whoever can \
                     change the link chooses the secrets): name the file itself"
                ))
            } else {
                SecretsError(format!("cannot open the secrets file {shown}: {err}"))
            }
        })?;
    check_private(
        path,
        &file
            .metadata()
            .map_err(|err| SecretsError(format!("cannot read the secrets file {shown}: {err}")))?,
    )?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| SecretsError(format!("cannot read the secrets file {shown}: {err}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SecretsError(format!(
            "the secrets file {shown} is larger than {} MiB; is it the right file?",
            MAX_FILE_BYTES >> 20
        )));
    }
    let text = String::from_utf8(bytes).map_err(|err| {
        let valid = &err.as_bytes()[..err.utf8_error().valid_up_to()];
        let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
        SecretsError(format!("{shown} line {line}: the text is not valid UTF-8"))
    })?;
    parse(&text).map_err(|err| SecretsError(format!("{shown} line {}: {}", err.line, err.message)))
}

/// Refuses a secrets file that is not a regular file of ours, private to
/// us.
fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), SecretsError> {
    let shown = path.display();
    if !meta.is_file() {
        return Err(SecretsError(format!("the secrets file {shown} is not a regular file")));
    }
    let us = private_fs::euid();
    if meta.uid() != us {
        return Err(SecretsError(format!(
            "the secrets file {shown} is owned by user {}, not by the user shellkeep runs as \
             ({us}); whoever owns it can change the secrets: make it yours (chown {us} {shown}; \
             chmod 600 {shown})",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretsError(format!(
            "the secrets file {shown} is open to other users (mode {mode:04o}); make it private: \
             chmod 600 {shown}"
        )));
    }
    Ok(())
}

/// A line of a secrets file that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong, naming no value.
    pub message: String,
}

/// Parses dotenv text: `NAME=value` lines, `export NAME=value`, blank lines
/// and `#` comment lines. A value is
/// - in single quotes: taken literally, newlines included;
/// - in double quotes: `\n`, `\r`, `\t`, `\"` and `\\` are escapes (any
///   other backslash is kept), newlines included;
/// - unquoted: the rest of the line, up to a `#` after a space or tab (a
///   comment), without surrounding blanks.
///
/// After a closing quote only blanks and a comment may follow. A name may
/// appear only once, and may not be one the shell or shellkeep relies on.
pub(crate) fn parse(text: &str) -> Result<Vec<Entry>, ParseError> {
    let mut cursor = Cursor { text, pos: 0, line: 1 };
    let mut entries: Vec<Entry> = Vec::new();
    while cursor.next_entry() {
        let line = cursor.line;
        let fail = |message: String| ParseError { line, message };
        let name = cursor.name().map_err(fail)?;
        let value = cursor.value(name, line)?;
        check_entry(name, &value, &entries).map_err(fail)?;
        entries.push(Entry { name: name.to_owned(), value, line });
    }
    Ok(entries)
}

/// Why `name=value` cannot be an entry after `entries`: a NUL in the value,
/// a name the shell or shellkeep relies on, or a name set twice.
fn check_entry(name: &str, value: &str, entries: &[Entry]) -> Result<(), String> {
    if value.contains('\0') {
        // No environment can hold it: the shell would not start.
        return Err(format!("the value of {name} contains a NUL character"));
    }
    if RESERVED_NAMES.contains(&name)
        || ["SHELLKEEP_", "BASH_FUNC_", "__sk", "__SK"].iter().any(|p| name.starts_with(p))
    {
        return Err(format!(
            "{name} cannot be set by a secrets file: the shell or shellkeep relies on it"
        ));
    }
    if let Some(first) = entries.iter().find(|e| e.name == name) {
        return Err(format!("{name} is set again (first on line {})", first.line));
    }
    Ok(())
}

/// The quotes a value may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// Every character as it is.
    Single,
    /// Escapes (`\n`, `\r`, `\t`, `\"`, `\\`), and a CRLF read as LF.
    Double,
}

impl Quote {
    /// The quote character.
    fn char(self) -> char {
        match self {
            Quote::Single => '\'',
            Quote::Double => '"',
        }
    }

    /// Its name in a message.
    fn word(self) -> &'static str {
        match self {
            Quote::Single => "single",
            Quote::Double => "double",
        }
    }
}

/// A position in the text being parsed.
struct Cursor<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    /// The line of the next character (1-based).
    line: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Skips spaces and tabs; whether there were any.
    fn skip_blanks(&mut self) -> bool {
        !self.take_while(|c| c == ' ' || c == '\t').is_empty()
    }

    /// The characters from here that satisfy `keep` (never a newline).
    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &'a str {
        let rest = self.rest();
        let len = rest.find(|c: char| c == '\n' || !keep(c)).unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    /// The rest of the line, without its newline, which is consumed.
    fn rest_of_line(&mut self) -> &'a str {
        let line = self.take_while(|_| true);
        self.bump();
        line
    }

    /// Skips blank lines and comments up to the next entry; false at the
    /// end of the text.
    fn next_entry(&mut self) -> bool {
        loop {
            self.skip_blanks();
            match self.peek() {
                None => return false,
                Some('\n' | '\r') => {
                    self.bump();
                }
                Some('#') => {
                    self.rest_of_line();
                }
                Some(_) => return true,
            }
        }
    }

    /// An entry's name (after an optional `export`) and its `=`.
    fn name(&mut self) -> Result<&'a str, String> {
        if self.rest().starts_with("export") && self.rest()[6..].starts_with([' ', '\t']) {
            self.pos += "export".len();
            self.skip_blanks();
        }
        let name = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_name(name) {
            return Err("expected NAME=value (a name is letters, digits and `_`, not starting \
                        with a digit)"
                .to_owned());
        }
        self.skip_blanks();
        if self.peek() != Some('=') {
            return Err(format!("expected `=` after {name}"));
        }
        self.bump();
        Ok(name)
    }

    /// The value of `name` (whose entry starts on `line`): quoted, or the
    /// rest of the line up to a comment, without surrounding blanks.
    fn value(&mut self, name: &str, line: usize) -> Result<String, ParseError> {
        let blank_before = self.skip_blanks();
        let quote = match self.peek() {
            Some('\'') => Quote::Single,
            Some('"') => Quote::Double,
            _ => return Ok(self.unquoted(blank_before)),
        };
        self.bump();
        let value = self.quoted(quote).ok_or_else(|| ParseError {
            line,
            message: format!(
                "the {} quote that opens the value of {name} is never closed",
                quote.word()
            ),
        })?;
        self.end_after_quote(name)?;
        Ok(value)
    }

    /// A quoted value after its opening quote, up to the closing one, which
    /// is consumed; `None` when the text ends first.
    fn quoted(&mut self, quote: Quote) -> Option<String> {
        let mut value = String::new();
        loop {
            match self.bump()? {
                c if c == quote.char() => return Some(value),
                '\\' if quote == Quote::Double => match self.bump()? {
                    'n' => value.push('\n'),
                    'r' => value.push('\r'),
                    't' => value.push('\t'),
                    c @ ('"' | '\\') => value.push(c),
                    c => {
                        value.push('\\');
                        value.push(c);
                    }
                },
                '\r' if quote == Quote::Double && self.peek() == Some('\n') => {}
                c => value.push(c),
            }
        }
    }

    /// An unquoted value: the rest of the line, up to a `#` after a blank
    /// (`blank_before`: the value itself started after one).
    fn unquoted(&mut self, blank_before: bool) -> String {
        let raw = self.rest_of_line();
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let comment = if blank_before && raw.starts_with('#') {
            Some(0)
        } else {
            raw.find(" #").or_else(|| raw.find("\t#"))
        };
        comment.map_or(raw, |at| &raw[..at]).trim_end_matches([' ', '\t']).to_owned()
    }

    /// After a closing quote: blanks, then a comment or the end of the line.
    fn end_after_quote(&mut self, name: &str) -> Result<(), ParseError> {
        self.skip_blanks();
        match self.peek() {
            None | Some('#') => {
                self.rest_of_line();
                Ok(())
            }
            Some('\n') => {
                self.bump();
                Ok(())
            }
            Some('\r') if self.rest().starts_with("\r\n") || self.rest().len() == 1 => {
                self.rest_of_line();
                Ok(())
            }
            Some(_) => Err(ParseError {
                line: self.line,
                message: format!(
                    "text after the closing quote of {name}'s value (only a `#` comment may \
                     follow)"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A scratch directory removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!(
                "shellkeep-secrets-{name}-{}-{}",
                std::process::id(),
                private_fs::random_hex(4).expect("random")
            ));
            std::fs::create_dir(&dir).expect("scratch dir");
            Dir(dir)
        }

        /// A file of `text` with `mode`.
        fn file(&self, name: &str, text: &str, mode: u32) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn pairs(entries: &[Entry]) -> Vec<(&str, &str)> {
        entries.iter().map(|e| (e.name.as_str(), e.value.as_str())).collect()
    }

    #[test]
    fn dotenv_values_unquote_as_documented() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("\n\n  \n\t\n", &[]),
            ("# a comment\n  # indented\nA=b\n", &[("A", "b")]),
            ("A=plain value\n", &[("A", "plain value")]),
            ("A=  padded  \t\n", &[("A", "padded")]),
            ("A = spaced\n", &[("A", "spaced")]),
            ("export A=exported\n", &[("A", "exported")]),
            ("export\tA=tab\n", &[("A", "tab")]),
            ("exported=x\n", &[("exported", "x")]),
            ("A=value # comment\n", &[("A", "value")]),
            ("A=value\t# comment\n", &[("A", "value")]),
            ("A=pass#word\n", &[("A", "pass#word")]),
            ("A=#notacomment\n", &[("A", "#notacomment")]),
            ("A= #comment\n", &[("A", "")]),
            ("A=\n", &[("A", "")]),
            ("A=x\r\nB=y\r\n", &[("A", "x"), ("B", "y")]),
            ("A=no newline at end", &[("A", "no newline at end")]),
            ("A='single $HOME \\n \"q\"'\n", &[("A", "single $HOME \\n \"q\"")]),
            ("A='with # hash' # comment\n", &[("A", "with # hash")]),
            ("A='line one\nline two'\nB=c\n", &[("A", "line one\nline two"), ("B", "c")]),
            ("A=\"a\\nb\\tc\\\"d\\\\e\\$f\"\n", &[("A", "a\nb\tc\"d\\e\\$f")]),
            ("A=\"multi\nline\"  # comment\n", &[("A", "multi\nline")]),
            ("A=\"crlf\r\ninside\"\r\n", &[("A", "crlf\ninside")]),
            ("A=\"\"\n", &[("A", "")]),
            ("A=mid\"quote'\n", &[("A", "mid\"quote'")]),
            ("_A1=x\nb_2=y\n", &[("_A1", "x"), ("b_2", "y")]),
            ("A=é ünïcødé\n", &[("A", "é ünïcødé")]),
            (
                "A='-----BEGIN KEY-----\nabc\n-----END KEY-----'\n",
                &[("A", "-----BEGIN KEY-----\nabc\n-----END KEY-----")],
            ),
        ];
        for (text, expected) in cases {
            let entries = parse(text).unwrap_or_else(|err| panic!("{text:?}: {err:?}"));
            assert_eq!(pairs(&entries), *expected, "{text:?}");
        }
        let entries = parse("# c\nA=1\n\nB='x\ny'\nC=2\n").expect("parses");
        let lines: Vec<usize> = entries.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 4, 6]);
    }

    #[test]
    fn the_documented_example_parses_as_it_says() {
        let page = include_str!("../../../docs/security.md");
        let start = page.find("```sh\n# a comment line").expect("the example") + "```sh\n".len();
        let example = &page[start..][..page[start..].find("```").expect("its end")];
        let entries = parse(example).expect("the example in docs/security.md parses");
        assert_eq!(
            pairs(&entries),
            [
                ("DEPLOY_TOKEN", "abc123def456"),
                ("DB_URL", "postgres://app:pa#ss@db/app"),
                ("SIGNING_KEY", "taken literally: $HOME \\n"),
                ("WEBHOOK", "line one\nline \"two\"\\"),
                ("PEM", "-----BEGIN PRIVATE KEY-----\nMIIEv...\n-----END PRIVATE KEY-----"),
            ]
        );
    }

    #[test]
    fn dotenv_errors_name_the_line_and_never_the_value() {
        let cases: &[(&str, usize, &str)] = &[
            ("A=1\nnot a line\n", 2, "expected `=` after not"),
            ("A=1\n=value\n", 2, "expected NAME=value"),
            ("1A=x\n", 1, "expected NAME=value"),
            ("A-B=x\n", 1, "expected `=` after A"),
            ("A=1\n\nB='unclosed secretvalue\nmore\n", 3, "single quote that opens the value of B"),
            ("B=\"unclosed secretvalue\\\"\n", 1, "double quote that opens the value of B"),
            ("B=\"ends in backslash\\", 1, "double quote that opens the value of B"),
            ("A='secretvalue' trailing\n", 1, "text after the closing quote of A's value"),
            ("A=\"multi\nline\" trailing\n", 2, "text after the closing quote of A's value"),
            ("A=x\n# c\nA=y\n", 3, "A is set again (first on line 1)"),
            ("PATH=/evil\n", 1, "PATH cannot be set by a secrets file"),
            ("PROMPT_COMMAND=x\n", 1, "PROMPT_COMMAND cannot be set"),
            ("SHELLKEEP_SECRETS=x\n", 1, "SHELLKEEP_SECRETS cannot be set"),
            ("__sk_c=x\n", 1, "__sk_c cannot be set"),
            ("A=1\nB=\"nul\0secretvalue\"\n", 2, "the value of B contains a NUL character"),
        ];
        for (text, line, message) in cases {
            match parse(text) {
                Err(err) => {
                    assert_eq!(err.line, *line, "{text:?}: {err:?}");
                    assert!(err.message.contains(message), "{text:?}: {err:?}");
                    assert!(!err.message.contains("secretvalue"), "{text:?}: {err:?}");
                }
                Ok(entries) => panic!("{text:?} parsed: {entries:?}"),
            }
        }
    }

    #[test]
    fn names_that_say_secret() {
        let secret = [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "github_token",
            "CI_JOB_TOKEN",
            "TF_TOKEN_app_terraform_io",
            "TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "CLIENT_SECRET",
            "SECRET_KEY_BASE",
            "SECRET",
            "MY_SECRETS",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENAI_APIKEY",
            "STRIPE_KEY",
            "SSH_PRIVATE_KEY",
            "PASSWORD",
            "PGPASSWORD",
            "DB_PASSWORD",
            "REDIS_PASSWD",
            "AZURE_CREDENTIALS",
            "DOCKER_CREDENTIAL",
            "GITHUB_PAT",
            "MYSQL_PWD",
            "SMTP_PASS",
            "GPG_PASSPHRASE",
        ];
        let not_secret = [
            "KEY",
            "PAT",
            "PWD",
            "OLDPWD",
            "PASS",
            "SSH_AUTH_SOCK",
            "GPG_KEY_ID",
            "AWS_ACCESS_KEY_ID",
            "SSH_KEY_PATH",
            "PASSWORD_STORE_DIR",
            "AWS_SHARED_CREDENTIALS_FILE",
            "CREDENTIALS_DIRECTORY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GIT_CREDENTIAL_HELPER",
            "SSH_PUBLIC_KEY",
            "NEXT_PUBLIC_MAPS_API_KEY",
            "STRIPE_PUBLISHABLE_KEY",
            "TOKEN_URL",
            "DB_PASSWORD_FILE",
            "PASSWORD_COMMAND",
            "SHELLKEEP_SECRETS",
            "SHELLKEEP_SECRETS_FILE",
            "TOKENIZERS_PARALLELISM",
            "KEYTIMEOUT",
            "MONKEY",
            "HOME",
            "PATH",
            "TERM",
            "GIT_ASKPASS",
            "SUDO_ASKPASS",
            "XAUTHORITY",
            "_",
            "",
        ];
        let wrong: Vec<&str> = secret
            .iter()
            .filter(|n| !name_says_secret(n))
            .chain(not_secret.iter().filter(|n| name_says_secret(n)))
            .copied()
            .collect();
        assert!(wrong.is_empty(), "classified wrongly: {wrong:?}");
    }

    #[test]
    fn named_variables_must_exist_and_be_long_enough() {
        let env = env(&[
            ("DEPLOY", "a-long-deploy-value"),
            ("SHORT", "abc1234"),
            ("EMPTY", ""),
            ("EIGHT", "12345678"),
        ]);
        let named = |names: &[&str]| {
            let sources = Sources {
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                names_from: "the list".to_owned(),
                ..Sources::default()
            };
            load(&sources, &env)
        };
        let found = named(&["DEPLOY", " EIGHT ", "", "DEPLOY"]).expect("valid");
        assert_eq!(
            found.masked(),
            [("DEPLOY".into(), "a-long-deploy-value".into()), ("EIGHT".into(), "12345678".into())]
        );
        assert!(found.secrets.iter().all(|s| s.origin == Origin::Named));
        assert!(found.exported().is_empty() && !found.shapes && found.notices.is_empty());

        let cases: &[(&str, &str)] = &[
            ("SHORT", "secret SHORT (from the list): its value is shorter than 8"),
            ("EMPTY", "secret EMPTY (from the list): its value is empty"),
            ("MISSING", "the server's environment has no variable MISSING"),
            ("BAD-NAME", "secret BAD-NAME (from the list): not a variable name"),
        ];
        for (name, message) in cases {
            let err = named(&[name]).expect_err(name);
            assert!(err.0.contains(message), "{name}: {err}");
            assert!(!err.0.contains("abc1234"), "{err}");
        }
    }

    #[test]
    fn a_named_value_that_is_not_utf8_is_an_error() {
        use std::os::unix::ffi::OsStringExt;
        let env =
            vec![(OsString::from("RAW"), OsString::from_vec(b"\xff\xfe-long-enough".to_vec()))];
        let sources = Sources { names: vec!["RAW".into()], ..Sources::default() };
        let err = load(&sources, &env).expect_err("not UTF-8");
        assert!(err.0.contains("RAW") && err.0.contains("not valid UTF-8"), "{err}");
        // Found by its name, it is only skipped, with a notice.
        let env = vec![(OsString::from("RAW_TOKEN"), env[0].1.clone())];
        let found = load(&Sources { defaults: true, ..Sources::default() }, &env).expect("loads");
        assert!(found.secrets.is_empty());
        assert_eq!(found.notices.len(), 1);
        assert!(found.notices[0].contains("RAW_TOKEN"), "{:?}", found.notices);
    }

    #[test]
    fn defaults_find_names_that_say_secret_and_skip_short_ones_with_a_notice() {
        let env = env(&[
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            ("DB_PASSWORD", "hunter2"),
            ("API_KEY", ""),
            ("HOME", "/home/someone-with-long-name"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXXXXX/agent.1234"),
            ("NAMED_ONE", "named-and-long"),
            ("OTHER_SECRET", "other-secret-value"),
            ("OTHER_SECRET", "duplicate-later-value"),
        ]);
        let sources = Sources {
            names: vec!["NAMED_ONE".into()],
            defaults: true,
            file: None,
            ..Sources::default()
        };
        let found = load(&sources, &env).expect("loads");
        assert!(found.shapes);
        let names: Vec<(&str, Origin)> =
            found.secrets.iter().map(|s| (s.name.as_str(), s.origin)).collect();
        assert_eq!(
            names,
            [
                ("NAMED_ONE", Origin::Named),
                ("GITHUB_TOKEN", Origin::NamePattern),
                ("OTHER_SECRET", Origin::NamePattern),
            ]
        );
        assert_eq!(found.notices.len(), 2, "{:?}", found.notices);
        assert!(found.notices[0].contains("API_KEY") && found.notices[0].contains("empty"));
        assert!(found.notices[1].contains("DB_PASSWORD") && found.notices[1].contains("shorter"));
        assert!(found.notices.iter().all(|n| !n.contains("hunter2")));
        // Its Debug shows names and lengths, never a value.
        let debug = format!("{found:?}");
        assert!(debug.contains("GITHUB_TOKEN") && !debug.contains("ghp_"), "{debug}");

        let off = load(&Sources::default(), &env).expect("loads");
        assert_eq!(off, Found::default());
    }

    #[test]
    fn the_files_values_are_masked_and_exported() {
        let dir = Dir::new("exported");
        let path = dir.file(
            "env",
            "# deploy\nexport DEPLOY_KEY='line-one\nline-two'\nPLAIN=plain-value-1 # c\n",
            0o600,
        );
        let env = env(&[("PLAIN", "server-plain-value")]);
        let sources = Sources {
            names: vec!["PLAIN".into()],
            file: Some(path.clone()),
            defaults: false,
            ..Sources::default()
        };
        let found = load(&sources, &env).expect("loads");
        let exported = [
            ("DEPLOY_KEY".to_owned(), "line-one\nline-two".to_owned()),
            ("PLAIN".to_owned(), "plain-value-1".to_owned()),
        ];
        assert_eq!(found.exported(), exported);
        // The server's own PLAIN is masked as well as the file's.
        assert_eq!(found.masked().len(), 3);
        assert!(found.masked().contains(&("PLAIN".into(), "server-plain-value".into())));

        let short = dir.file("short", "OK=long-enough\nPIN=1234\n", 0o600);
        let err = load(&Sources { file: Some(short.clone()), ..Sources::default() }, &[])
            .expect_err("too short");
        assert_eq!(
            err.0,
            format!(
                "{} line 2: PIN: its value is shorter than 8 characters, too short to mask \
                 without wrecking ordinary output",
                short.display()
            )
        );
        let bad = dir.file("bad", "A=long-enough\nB='unclosed\n", 0o600);
        let err = read_file(&bad).expect_err("bad");
        assert!(err.0.starts_with(&format!("{} line 2: the single quote", bad.display())), "{err}");
    }

    #[test]
    fn the_file_must_be_private_to_us() {
        let dir = Dir::new("private");
        let text = "TOKEN=private-value\n";
        let good = dir.file("good", text, 0o600);
        assert_eq!(read_file(&good).expect("private").len(), 1);
        assert_eq!(read_file(&dir.file("readonly", text, 0o400)).expect("private").len(), 1);

        for mode in [0o644, 0o640, 0o604, 0o660, 0o602, 0o610, 0o601] {
            let path = dir.file(&format!("mode{mode:o}"), text, mode);
            let err = read_file(&path).expect_err("open to others");
            assert_eq!(
                err.0,
                format!(
                    "the secrets file {0} is open to other users (mode {mode:04o}); make it \
                     private: chmod 600 {0}",
                    path.display()
                )
            );
        }

        let link = dir.0.join("link");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        let err = read_file(&link).expect_err("a symlink");
        assert!(err.0.contains("is a symbolic link") && err.0.contains("name the file itself"));

        let err = read_file(&dir.0).expect_err("a directory");
        assert!(err.0.ends_with("is not a regular file"), "{err}");

        // A FIFO is refused without blocking on an open with no writer.
        let fifo = dir.0.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let err = read_file(&fifo).expect_err("a FIFO");
        assert!(err.0.ends_with("is not a regular file"), "{err}");

        let err = read_file(&dir.0.join("missing")).expect_err("missing");
        assert!(err.0.starts_with("cannot open the secrets file"), "{err}");

        let big = dir.file("big", &"A=b\n".repeat(300_000), 0o600);
        assert!(read_file(&big).expect_err("too big").0.contains("larger than 1 MiB"));

        let latin1 = dir.0.join("latin1");
        std::fs::write(&latin1, b"A=ok-value\nB=caf\xe9-value\n").expect("write");
        std::fs::set_permissions(&latin1, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let err = read_file(&latin1).expect_err("not UTF-8");
        assert!(err.0.ends_with("line 2: the text is not valid UTF-8"), "{err}");
    }

    #[test]
    fn a_file_owned_by_someone_else_is_refused() {
        let dir = Dir::new("owner");
        // Root can give a file away; anyone else finds one of root's.
        let path = if private_fs::euid() == 0 {
            let path = dir.file("theirs", "TOKEN=their-value\n", 0o600);
            std::os::unix::fs::chown(&path, Some(65_534), None).expect("chown");
            path
        } else {
            PathBuf::from("/etc/passwd")
        };
        let err = read_file(&path).expect_err("someone else's");
        assert!(err.0.contains("is owned by user"), "{err}");
        assert!(err.0.contains("chmod 600"), "{err}");
    }
}
