//! Random names: the hex strings that make the names of our directories,
//! files and markers unguessable. A leaf: it names nothing of ours, so any
//! module may use it without an import running back up.

use std::io;

/// `n_bytes` random bytes as lowercase hex.
pub fn random_hex(n_bytes: usize) -> io::Result<String> {
    let mut bytes = vec![0u8; n_bytes];
    getrandom::fill(&mut bytes).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
