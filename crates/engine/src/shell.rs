//! The shell integration: the start-up file we give bash, the line we type
//! to run a command, and reading back the state bash leaves for us.
//!
//! Commands never go through readline. Each one is written to a private
//! file and run by a short function, `__sk_run`, that first prints a start
//! marker; `PROMPT_COMMAND` prints an end marker with the exit status and
//! writes the working directory and `PATH` to a state file. So the echo of
//! what we type is easy to drop (it comes before the start marker), any
//! command text works (tabs, `!`, `\;`, heredocs, 100 KB lines), our own
//! commands stay out of history, and `set -u` cannot break the prompt.
//! This module writes files and formats text; it does not start processes.

use std::path::{Path, PathBuf};

use crate::screen::MARKER_OSC;

/// The private files of one shell.
#[derive(Debug, Clone)]
pub struct ShellFiles {
    /// The private directory (mode 0700).
    pub dir: PathBuf,
}

impl ShellFiles {
    /// The start-up file passed to `bash --rcfile`.
    pub fn rc_file(&self) -> PathBuf {
        self.dir.join("init.sh")
    }

    /// The file holding the command to run next.
    pub fn command_file(&self) -> PathBuf {
        self.dir.join("cmd")
    }

    /// The file where the prompt writes the working directory and `PATH`.
    pub fn state_file(&self) -> PathBuf {
        self.dir.join("state")
    }
}

/// The start-up file for a shell whose markers carry `nonce`.
///
/// `user_rc` is sourced first when given (normally `~/.bashrc`), so that
/// aliases and functions the user relies on exist, and our settings win.
pub fn rc_script(files: &ShellFiles, nonce: &str, user_rc: Option<&Path>) -> String {
    let user_rc = match user_rc {
        Some(path) => format!("[ -r {0} ] && . {0}\n", shell_quote(&path.to_string_lossy())),
        None => String::new(),
    };
    format!(
        r#"# shellkeep shell integration (generated).
{user_rc}set +H
bind 'set enable-bracketed-paste off' 2>/dev/null
HISTCONTROL="ignorespace${{HISTCONTROL:+:$HISTCONTROL}}"
PS1=''
PS2=''
__sk_dir={dir}
__sk_nonce={nonce}
__sk_seq=0
__sk_prompt() {{
  local __sk_status=$?
  builtin printf '%s\0%s\0' "$PWD" "$PATH" >"$__sk_dir/state" 2>/dev/null
  PS1=''
  PS2=''
  builtin printf '\e]{osc};%s;E;%s;%s\a' "$__sk_nonce" "$__sk_seq" "$__sk_status"
  return $__sk_status
}}
__sk_run() {{
  builtin printf '\e]{osc};%s;S;%s\a' "$__sk_nonce" "$__sk_seq"
  builtin source "$__sk_dir/cmd"
}}
PROMPT_COMMAND=__sk_prompt
"#,
        dir = shell_quote(&files.dir.to_string_lossy()),
        osc = MARKER_OSC,
    )
}

/// The line typed into the shell to run command number `seq`. The leading
/// space keeps it out of history.
pub fn run_line(seq: u64) -> String {
    format!(" __sk_seq={seq};__sk_run\r")
}

/// What the prompt last recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellState {
    /// The shell's working directory.
    pub cwd: PathBuf,
    /// The shell's `PATH`.
    pub path: String,
}

/// Reads the state file; `None` if it is missing or malformed.
pub fn read_state(files: &ShellFiles) -> Option<ShellState> {
    use std::os::unix::ffi::OsStrExt;
    // Never followed as a symlink; bounded (a PATH is far shorter).
    let bytes = crate::private_fs::read_private_file(&files.state_file(), 1 << 20).ok()?;
    let mut fields = bytes.split(|&b| b == 0);
    let cwd = std::ffi::OsStr::from_bytes(fields.next()?);
    let path = String::from_utf8_lossy(fields.next()?).into_owned();
    Some(ShellState { cwd: PathBuf::from(cwd), path })
}

/// The Python interpreter a command named `python` (else `python3`) would
/// run with this `PATH`, as `command -v` would find it.
pub fn python_interpreter(path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    ["python", "python3"].iter().find_map(|name| {
        path.split(':').filter(|dir| !dir.is_empty()).find_map(|dir| {
            let candidate = Path::new(dir).join(name);
            let meta = std::fs::metadata(&candidate).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
        })
    })
}

/// Quotes `text` for bash with single quotes.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain"), "'plain'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn python_is_found_on_path_in_order() {
        let dir = std::env::temp_dir().join(format!("shellkeep-py-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let make = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(p, "").expect("write");
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        make(&b.join("python3"));
        let path = format!("{}:{}", a.display(), b.display());
        assert_eq!(python_interpreter(&path), Some(b.join("python3")));
        make(&a.join("python"));
        assert_eq!(python_interpreter(&path), Some(a.join("python")));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
