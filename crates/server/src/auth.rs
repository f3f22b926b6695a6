//! Who may call the HTTP transport, and how much at once: bearer tokens
//! (each one a principal), their file, the check of a request's
//! `Authorization` header in constant time, and the bound on one
//! principal's calls in flight.
//!
//! Tokens come from `$SHELLKEEP_TOKEN` (one token, principal `default`),
//! from a token file (`--token-file`: one `NAME:TOKEN` a line, `#` comments
//! and blank lines ignored; the file must be a regular file of ours, mode
//! 0600 or stricter, not a symlink), or are generated at start (256 random
//! bits, hex; principal `default`). A token is 16 to 4096 visible ASCII
//! characters; a name 1 to 64 of `A-Z a-z 0-9 . _ -` (never a `/`, which
//! `shellkeep ls` puts between a principal and its session's name).
//!
//! A presented token is compared with every configured token, each byte of
//! each, whatever matches: how long the check takes depends on the
//! configured tokens' lengths only, never on how much of a guess was right
//! nor on which principal it belongs to. No token is ever logged, put in
//! an error or shown by `Debug`.
//!
//! This module parses and checks; it binds nothing and serves nothing
//! (`http` does). It stands below `config` (which reads the token file)
//! and `http` (which checks requests), and uses only `render`.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// The principal of `$SHELLKEEP_TOKEN` and of a generated token.
pub(crate) const DEFAULT_PRINCIPAL: &str = "default";

/// The fewest characters of a token: 16 (and so at least 8, which masking
/// needs).
pub(crate) const MIN_TOKEN: usize = 16;
/// The most characters of a token.
pub(crate) const MAX_TOKEN: usize = 4096;
/// The most characters of a principal's name.
pub(crate) const MAX_NAME: usize = 64;
/// The most principals a token file may name.
pub(crate) const MAX_PRINCIPALS: usize = 1024;
/// The largest token file read, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The configured tokens, each with its principal's name. `Debug` shows
/// the names, never a token.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tokens {
    /// (principal, token), in the order configured.
    entries: Vec<(String, String)>,
    /// Where they came from, for `doctor` and the log: `$SHELLKEEP_TOKEN`,
    /// the token file's path, or the generated token's file.
    pub origin: String,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("principals", &self.names().collect::<Vec<_>>())
            .field("origin", &self.origin)
            .finish()
    }
}

impl Tokens {
    /// One token for the principal `default` (`$SHELLKEEP_TOKEN`, or one
    /// generated), checked as a token file's are.
    pub(crate) fn single(token: &str, origin: &str) -> Result<Tokens, String> {
        check_token(token).map_err(|why| format!("{origin}: {why}"))?;
        Ok(Tokens {
            entries: vec![(DEFAULT_PRINCIPAL.to_owned(), token.to_owned())],
            origin: origin.to_owned(),
        })
    }

    /// A fresh token for the principal `default`: 256 bits from the
    /// system's random source, as hex.
    pub(crate) fn generate(origin: &str) -> std::io::Result<Tokens> {
        let token = shellkeep_engine::random_hex(32)?;
        Ok(Tokens {
            entries: vec![(DEFAULT_PRINCIPAL.to_owned(), token)],
            origin: origin.to_owned(),
        })
    }

    /// Reads and parses the token file `path`, which must be a regular
    /// file of ours that nobody else may read or write.
    pub(crate) fn read_file(path: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        let file = std::fs::File::options()
            .read(true)
            // Never through a symlink; a FIFO must not block start-up.
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(|err| {
                if err.raw_os_error() == Some(nix::libc::ELOOP) {
                    format!(
                        "--token-file {shown} is a symbolic link, which is refused (whoever can \
                         change the link chooses the tokens): name the file itself"
                    )
                } else {
                    format!("--token-file {shown}: cannot open it: {err}")
                }
            })?;
        let meta = file.metadata().map_err(|err| format!("--token-file {shown}: {err}"))?;
        let us = shellkeep_engine::euid();
        if !meta.is_file() {
            return Err(format!("--token-file {shown} is not a regular file"));
        }
        if meta.uid() != us {
            return Err(format!(
                "--token-file {shown} is owned by user {}, not by the user shellkeep runs as \
                 ({us}); whoever owns it chooses who may drive the shells: make it yours \
                 (chown {us} {shown}; chmod 600 {shown})",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "--token-file {shown} is open to other users (mode {mode:04o}); make it \
                 private: chmod 600 {shown}"
            ));
        }
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("--token-file {shown}: cannot read it: {err}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "--token-file {shown} is larger than {} MiB; is it the right file?",
                MAX_FILE_BYTES >> 20
            ));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("--token-file {shown}: the text is not valid UTF-8"))?;
        let entries = parse(&text).map_err(|why| format!("--token-file {shown} {why}"))?;
        Ok(Tokens { entries, origin: shown.to_string() })
    }

    /// The principals' names, in the order configured.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(name, _)| name.as_str())
    }

    /// The (principal, token) pairs: for the masks, which hide every token
    /// in what the server shows.
    pub(crate) fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The principal whose token `presented` is, compared with every
    /// configured token in full ([`same`]), whichever matches.
    pub(crate) fn principal(&self, presented: &[u8]) -> Option<&str> {
        let mut found = None;
        for (name, token) in &self.entries {
            if same(token.as_bytes(), presented) {
                found = Some(name.as_str());
            }
        }
        found
    }
}

/// Whether `presented` equals `expected`, in a time that depends on
/// `expected`'s length only: every byte of `expected` is compared (with a
/// zero past `presented`'s end), differences are gathered with `|`, and
/// the lengths are compared last, the same way.
fn same(expected: &[u8], presented: &[u8]) -> bool {
    let mut difference = 0u8;
    for (index, byte) in expected.iter().enumerate() {
        let other = presented.get(index).copied().unwrap_or(0);
        difference |= std::hint::black_box(byte ^ other);
    }
    let lengths = (expected.len() ^ presented.len()) as u64;
    let lengths = (lengths | lengths >> 32) as u32;
    let lengths = (lengths | lengths >> 16) as u16;
    let lengths = (lengths | lengths >> 8) as u8;
    std::hint::black_box(difference | lengths) == 0
}

/// The text of a token file, as (principal, token) pairs; the error names
/// the line (`line N: why`), never a token.
fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, token)) = line.split_once(':') else {
            return Err(format!(
                "line {number}: expected NAME:TOKEN (a principal's name, a colon, its token)"
            ));
        };
        let (name, token) = (name.trim(), token.trim());
        check_name(name).map_err(|why| format!("line {number}: {why}"))?;
        check_token(token).map_err(|why| format!("line {number}: {why}"))?;
        if entries.iter().any(|(known, _)| known == name) {
            return Err(format!("line {number}: the name {name} is given twice"));
        }
        if entries.iter().any(|(_, known)| known == token) {
            return Err(format!(
                "line {number}: this token is already another name's; each principal needs a \
                 token of its own"
            ));
        }
        if entries.len() == MAX_PRINCIPALS {
            return Err(format!("line {number}: more than {MAX_PRINCIPALS} principals"));
        }
        entries.push((name.to_owned(), token.to_owned()));
    }
    if entries.is_empty() {
        return Err("holds no NAME:TOKEN line".to_owned());
    }
    Ok(entries)
}

/// A principal's name: 1 to [`MAX_NAME`] of `A-Z a-z 0-9 . _ -`.
fn check_name(name: &str) -> Result<(), String> {
    let fits = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(fits) {
        return Err(format!(
            "a name must be 1 to {MAX_NAME} of the characters A-Z a-z 0-9 . _ -, got {}",
            crate::render::echo(name)
        ));
    }
    Ok(())
}

/// A token: [`MIN_TOKEN`] to [`MAX_TOKEN`] visible ASCII characters (what
/// an HTTP header carries). The error never quotes it.
fn check_token(token: &str) -> Result<(), String> {
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be visible ASCII characters, without spaces".to_owned());
    }
    if !(MIN_TOKEN..=MAX_TOKEN).contains(&token.len()) {
        return Err(format!(
            "a token must have {MIN_TOKEN} to {MAX_TOKEN} characters, this one has {} (make \
             one with `openssl rand -hex 32`)",
            token.len()
        ));
    }
    Ok(())
}

/// The token of an `Authorization: Bearer TOKEN` header value (the scheme
/// in any case, RFC 9110), or `None`.
pub(crate) fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    let token = &rest[start..];
    let end = token.iter().rposition(|&b| b != b' ').map_or(0, |last| last + 1);
    Some(&token[..end])
}

/// The calls each principal has in flight, bounded per principal: a call
/// holds a [`Slot`] from the moment its request is admitted until its
/// response has been sent or dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// The most calls one principal may have in flight.
    limit: usize,
    /// Principal → calls in flight (absent: none).
    counts: Mutex<HashMap<String, usize>>,
}

impl InFlight {
    /// At most `limit` calls in flight per principal.
    pub(crate) fn new(limit: usize) -> Arc<InFlight> {
        Arc::new(InFlight { limit, counts: Mutex::new(HashMap::new()) })
    }

    /// A slot for one more call of `principal`, or `None` when it has
    /// `limit` in flight already.
    pub(crate) fn admit(self: &Arc<Self>, principal: &str) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(principal.to_owned()).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Slot { in_flight: Arc::clone(self), principal: principal.to_owned() })
    }

    /// The calls `principal` has in flight.
    #[cfg(test)]
    fn count(&self, principal: &str) -> usize {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(principal).copied().unwrap_or(0)
    }
}

/// One call in flight; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct Slot {
    in_flight: Arc<InFlight>,
    principal: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.in_flight.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /// A token equals only itself: not a prefix, not an extension, not
    /// one byte off, not the empty string.
    #[test]
    fn same_is_equality() {
        assert!(same(A.as_bytes(), A.as_bytes()));
        assert!(!same(A.as_bytes(), &A.as_bytes()[..31]));
        assert!(!same(A.as_bytes(), format!("{A}a").as_bytes()));
        assert!(!same(A.as_bytes(), b""));
        let mut off = A.as_bytes().to_vec();
        off[17] = b'b';
        assert!(!same(A.as_bytes(), &off));
        // A presented token 256 bytes longer: the lengths differ only in
        // their second byte.
        assert!(!same(A.as_bytes(), "a".repeat(32 + 256).as_bytes()));
    }

    /// Each line names its principal; comments and blank lines are skipped;
    /// each principal is found by its own token only.
    #[test]
    fn a_token_file_names_principals() {
        let text = format!("# who may call\n\nalice:{A}\n  bob : {B}  \n");
        let tokens = Tokens { entries: parse(&text).unwrap(), origin: "f".into() };
        assert_eq!(tokens.names().collect::<Vec<_>>(), ["alice", "bob"]);
        assert_eq!(tokens.principal(A.as_bytes()), Some("alice"));
        assert_eq!(tokens.principal(B.as_bytes()), Some("bob"));
        assert_eq!(tokens.principal(b"cccccccccccccccccccccccccccccccc"), None);
        assert!(!format!("{tokens:?}").contains(A), "{tokens:?}");
    }

    /// Each kind of bad line is refused, naming its line and never the
    /// token.
    #[test]
    fn bad_token_files_are_refused_by_line() {
        for (text, expected) in [
            ("alice", "line 1: expected NAME:TOKEN"),
            (&format!("\nal/ice:{A}") as &str, "line 2: a name must be"),
            (&format!(":{A}"), "line 1: a name must be"),
            ("alice:short", "line 1: a token must have 16 to 4096 characters, this one has 5"),
            ("alice:with a space in the middle", "line 1: a token must be visible ASCII"),
            (&format!("alice:{A}\nalice:{B}"), "line 2: the name alice is given twice"),
            (&format!("alice:{A}\nbob:{A}"), "line 2: this token is already another name's"),
            ("# nothing\n", "holds no NAME:TOKEN line"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.starts_with(expected), "{text:?}: {err}");
            assert!(!err.contains(A), "{err}");
        }
    }

    /// The file itself must be private and ours; a symlink is refused.
    #[test]
    fn a_token_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir()
            .join(format!("sk-tokens-{}", shellkeep_engine::random_hex(4).unwrap()));
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, format!("alice:{A}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Tokens::read_file(&file).unwrap_err();
        assert!(err.contains("is open to other users (mode 0644)"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let tokens = Tokens::read_file(&file).unwrap();
        assert_eq!(tokens.principal(A.as_bytes()), Some("alice"));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = Tokens::read_file(&link).unwrap_err();
        assert!(err.contains("is a symbolic link"), "{err}");
        let err = Tokens::read_file(&dir).unwrap_err();
        assert!(err.contains("is not a regular file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The scheme is matched in any case; spaces around the token are
    /// dropped; anything else is no bearer token.
    #[test]
    fn bearer_takes_the_token() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer   abc  "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic YWxhZGRpbjpvcGVuc2VzYW1l"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearer"), None);
    }

    /// A principal's calls beyond the limit are refused until one ends;
    /// another principal's are counted apart.
    #[test]
    fn in_flight_is_bounded_per_principal() {
        let in_flight = InFlight::new(2);
        let first = in_flight.admit("alice").unwrap();
        let _second = in_flight.admit("alice").unwrap();
        assert!(in_flight.admit("alice").is_none());
        let _other = in_flight.admit("bob").unwrap();
        drop(first);
        assert_eq!(in_flight.count("alice"), 1);
        assert!(in_flight.admit("alice").is_some());
    }
}
