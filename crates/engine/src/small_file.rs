//! Reading the small files of `/proc` and of control groups (a `stat`, a
//! `syscall`, a counter file) whole, in as few system calls as it takes.
//! A leaf: it knows nothing of who reads what.
//!
//! Not for: files of any size (the output logs, the policy), or parsing
//! what is read (its readers do).

use std::io::Read;
use std::path::Path;

/// The most of a small `/proc` or control-group file that is read: its
/// text is a line or a few (a `stat`, a `syscall`, a counter file).
const MAX_BYTES: usize = 16 * 1024;

/// A small file of `/proc` or of a control group, whole, in as few system
/// calls as it takes (an open, a read of up to 4 KiB, the read that says
/// the end, a close): `std::fs::read_to_string` asks its size first and,
/// told 0 as these files say, reads 32 bytes at a time to begin with.
/// At most [`MAX_BYTES`] bytes; anything that is not UTF-8 is an error.
pub(crate) fn read(path: impl AsRef<Path>) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut bytes = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            if len >= MAX_BYTES {
                break;
            }
            bytes.resize(len * 2, 0);
        }
        match file.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    bytes.truncate(len);
    String::from_utf8(bytes)
        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
}

#[cfg(test)]
mod tests {
    /// A `/proc` file, which says its size is 0, comes whole; a longer
    /// file comes whole up to the bound, and is cut there.
    #[test]
    fn a_small_file_comes_whole_and_a_long_one_is_cut_at_the_bound() {
        let status = super::read("/proc/self/status").expect("read /proc/self/status");
        assert!(status.starts_with("Name:") && status.contains("\nPid:"), "{status}");
        let dir = std::env::temp_dir().join(format!("shellkeep-small-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make a scratch directory");
        for (len, expected) in [(0, 0), (4096, 4096), (10_000, 10_000), (40_000, super::MAX_BYTES)]
        {
            let path = dir.join(format!("f{len}"));
            std::fs::write(&path, "x".repeat(len)).expect("write");
            assert_eq!(super::read(&path).expect("read").len(), expected, "a file of {len} bytes");
        }
        assert!(super::read(dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).expect("remove the scratch directory");
    }
}
