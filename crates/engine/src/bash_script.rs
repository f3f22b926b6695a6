//! The shell integration: the start-up file we give bash, the line we type
//! to run a command, and the keys file the prompt binds from.
//!
//! Commands never go through readline. Each one is written to a socket
//! whose other end only the shell holds ([`command_frame`]); the line we
//! type reads it into a variable (`__sk_pre`, which also prints the start
//! marker) and `eval`s it at the top level, so it runs as
//! if typed at a prompt: syntax errors read like an interactive shell's,
//! `$?` is the previous command's status, a top-level `return` is refused
//! as at a prompt. `PROMPT_COMMAND` sends the end record with the exit
//! status on the completion channel and then prints the end marker, after
//! draining terminal input nobody read, and sends the working directory
//! and `PATH` on the same channel (an `EXIT` trap sends them too, so
//! `cd X; exit` restarts in `X`). So the echo of what we type is
//! easy to drop (it comes before the start marker), any command text works
//! (tabs, `!`, `\;`, heredocs, 100 KB lines), our own commands stay out of
//! history, `set -u` cannot break the prompt, and `set -x` never traces our
//! functions: tracing is switched off in the prompt and back on inside the
//! `eval`, in groups whose trace goes to `/dev/null`.
//!
//! The same script, minus the user's start-up file, is what a nested or
//! replaced shell gets when the integration is reinstalled: it comes as a
//! frame on the command socket the shell inherited, which the typed line
//! reads and `eval`s ([`reinstall_line`]), never through a file. No script
//! carries the marker nonce: the first shell takes it from its environment,
//! a reinstalled one from the typed line. The nonce is no secret anyway:
//! a command ends on the shell's record on the completion channel
//! (descriptor 62), and the marker only places the end in the output.
//! The scripts are bash files of their own, `bash_rc.bash` (the head of
//! the start-up file) and `bash_script.bash` (the integration), included
//! at build time; the few values they take (the private directory, the
//! marker's OSC number, the first sequence number, the keys file, the
//! user's start-up file) come in a preamble of quoted assignments in front
//! of them. The key bindings the prompt puts back come from a sealed memory
//! file the shell holds at descriptor 61 ([`keys_file`]), never from a path
//! a command could write.
//! This module writes files and formats text; it does not start processes
//! (its tests run `bash`).

use std::path::{Path, PathBuf};

use crate::screen::MARKER_OSC;

/// The private files of one shell.
#[derive(Debug, Clone)]
pub(crate) struct ShellFiles {
    /// The private directory (mode 0700).
    pub dir: PathBuf,
}

impl ShellFiles {
    /// The start-up file passed to `bash --rcfile`; deleted once sourced.
    pub(crate) fn rc_file(&self) -> PathBuf {
        self.dir.join("init.sh")
    }
}

/// The environment variable that hands the first shell its marker nonce;
/// the start-up file moves it into a shell variable and unsets it.
pub(crate) const NONCE_VAR: &str = "__SK_NONCE";

/// The environment variable that tells the first shell at which descriptor
/// it got its end of the completion channel; the start-up file moves it to
/// descriptor 62 before anything else runs, and unsets the variable.
pub(crate) const CHANNEL_VAR: &str = "__SK_CHANNEL";

/// The environment variable that tells the first shell at which descriptor
/// it got its sealed keys file ([`keys_file`]); the start-up file moves it
/// to [`KEYS_FD`] and unsets the variable.
pub(crate) const KEYS_VAR: &str = "__SK_KEYS";

/// The shell's descriptor for its keys file: the prompt binds the keys
/// our typed line relies on from `/dev/fd/61`, a sealed memory file no
/// command can change, never from a path a command could write.
pub(crate) const KEYS_FD: i32 = 61;

/// The key bindings the typed line relies on, as the prompt binds them
/// again at every prompt (`bind -f`): the same as `__sk_keys` in the
/// integration, which binds them itself where the file is missing.
pub(crate) const KEYS: &str =
    "\"\\C-m\": accept-line\n\"\\C-j\": accept-line\n\"\\C-u\": kill-whole-line\n";

/// The environment variable that tells the first shell at which descriptor
/// it got its end of its command socket; the start-up file moves it to
/// [`COMMAND_FD`] and unsets the variable.
pub(crate) const COMMAND_VAR: &str = "__SK_CMD";

/// The shell's descriptor for its end of its command socket, whose other
/// end only the server holds: each command's text comes there as a frame
/// ([`command_frame`]), never through a file.
pub(crate) const COMMAND_FD: i32 = 60;

/// The frame of command `seq` on the command socket: its header
/// ([`frame_header`]), then the text's bytes. The shell loads the command
/// only from a whole frame with its own number (`__sk_load`).
pub(crate) fn command_frame(seq: u64, text: &str) -> Vec<u8> {
    let mut frame = frame_header(seq, text.len()).into_bytes();
    frame.extend_from_slice(text.as_bytes());
    frame
}

/// The bytes of a frame's header ([`frame_header`]): the shell reads it
/// with one `read -N`, one system call, where a line is read a byte at a
/// time with four calls for each.
pub(crate) const FRAME_HEADER_LEN: usize = 42;

/// A frame's header: the number and the text's length in bytes, each as 20
/// digits (any `u64` fits), a space between and a newline after.
fn frame_header(seq: u64, length: usize) -> String {
    format!("{seq:020} {length:020}\n")
}

/// The sealed memory file holding [`KEYS`], handed to the first shell at
/// [`KEYS_VAR`]: nobody can change it, whoever holds or reopens it.
pub(crate) fn keys_file() -> std::io::Result<std::os::fd::OwnedFd> {
    crate::private_fs::sealed_memfd("shellkeep-keys", KEYS.as_bytes())
}

/// The head of the start-up file: the completion channel, the nonce and
/// the user's start-up file; after a preamble that sets `__sk_user_rc`.
const RC_HEAD: &str = include_str!("bash_rc.bash");

/// The integration itself, after a preamble that sets `__sk_seq`,
/// `__sk_osc_value` and `__sk_dir_value`; its comments explain each
/// function.
const INTEGRATION: &str = include_str!("bash_script.bash");

/// The start-up file. Its first lines move the completion channel to
/// descriptor 62 (from the descriptor named by [`CHANNEL_VAR`]), before the
/// user's start-up file runs. The shell takes its marker nonce from
/// [`NONCE_VAR`] in its environment: the nonce never touches a file.
///
/// `user_rc` is sourced first when given (normally `~/.bashrc`), so that
/// aliases and functions the user relies on exist, and our settings win.
pub(crate) fn rc_script(files: &ShellFiles, user_rc: Option<&Path>) -> String {
    let user_rc = user_rc.map(|path| shell_quote(&path.to_string_lossy())).unwrap_or_default();
    format!(
        "# shellkeep shell integration (generated).\n__sk_user_rc={user_rc}\n{RC_HEAD}{}",
        integration(files, 0, true)
    )
}

/// The script that reinstalls the integration in a shell that lost it (a
/// nested `bash`, `exec bash`); its first prompt reports `seq`, the
/// handshake. The user's start-up file is not read again: the shell
/// already read its own. It carries nothing secret: the nonce comes with
/// the typed line ([`reinstall_line`]). `keys` says whether the shell
/// holds the session's own keys file at [`KEYS_FD`] (inherited from the
/// shell it was started from): only then does its prompt bind from it.
/// It reaches the shell as a frame on the command socket
/// ([`command_frame`] with the handshake's number), never through a file.
pub(crate) fn reinstall_script(files: &ShellFiles, seq: u64, keys: bool) -> String {
    integration(files, seq, keys)
}

/// The line typed into a shell that lost the integration, giving it the
/// marker `nonce`: it reads the frame of handshake `seq` holding the
/// `length` bytes of the script ([`reinstall_script`]) from the command
/// socket at [`COMMAND_FD`], which the shell inherited, and `eval`s the
/// script only when the header is exactly that one and all of its bytes
/// came (in the C locale, so that `read -N` counts bytes) within 5 s. A
/// frame a process holding the socket took bytes of runs nothing: the
/// shell stays without the integration and the reinstall is given up.
/// Nothing touches the disk. The leading space keeps the line out of
/// history where `ignorespace` is on; where it is not (the shell has not
/// read our settings yet), the script deletes the line from the history
/// list before any prompt can write it to the history file. The group
/// sends `set -x` traces and `set -v` echoes of the script to
/// `/dev/null`; its words are quoted (`\builtin`) against aliases.
pub(crate) fn reinstall_line(seq: u64, length: usize, nonce: &str) -> String {
    let header = frame_header(seq, length);
    let header = header.trim_end();
    Typing::EDITOR.line(&format!(
        " {{ __sk_nonce={nonce}; IFS= LC_ALL=C \\builtin read -r -N {FRAME_HEADER_LEN} -t 5 \
         -u {COMMAND_FD} __sk_h && [[ $__sk_h == $'{header}\\n' ]] \
         && LC_ALL=C IFS= \\builtin read -r -N {length} -t 5 -u {COMMAND_FD} __sk_r \
         && \\builtin eval \"$__sk_r\"; \\builtin unset __sk_h __sk_r; }} 2>/dev/null"
    ))
}

/// The integration script behind its preamble: the only values it takes
/// from Rust are assignments here, each quoted. The keys file is
/// `/dev/fd/61` when `keys`, else none.
fn integration(files: &ShellFiles, seq: u64, keys: bool) -> String {
    let keys = if keys { format!("/dev/fd/{KEYS_FD}") } else { String::new() };
    format!(
        "__sk_seq={seq}\n__sk_osc_value={}\n__sk_dir_value={}\n__sk_kf_value={}\n{INTEGRATION}",
        shell_quote(MARKER_OSC),
        shell_quote(&files.dir.to_string_lossy()),
        shell_quote(&keys),
    )
}

/// The line typed into the shell to run command number `seq`, whose text
/// is `command`: it loads the command from its socket and runs it with
/// `eval` at the top level. It names the text's length in bytes, so that
/// the shell reads the frame with one read, and flags a text that mentions
/// `trap` (`t`) or is not all ASCII (`b`: the shell then counts bytes in
/// the C locale). Its last word, `__sk_noedit`, turns line editing off
/// once the command ran, so that the next line reaches the shell whole
/// (`__sk_pre` puts editing back on for that line's command). It is typed
/// as [`Typing`] says (what discards a partial line first, what ends it).
/// The leading space keeps it out of history; `__sk_pre` sends its own
/// errors to `/dev/null`. Its words are quoted (`\builtin`) so that
/// aliases (`alias builtin=…` under `expand_aliases`) cannot replace them.
/// It is short: where the shell edits lines (at its first prompt, or after
/// a command that turned editing on), readline reads what is typed a byte
/// at a time, with three system calls for each (so no `--` after `eval`:
/// the text `__sk_pre` loads starts with `__sk_on` or `{ __sk_on; }`, or is
/// empty).
pub(crate) fn run_line(seq: u64, command: &str) -> String {
    let traps = if command.contains("trap") { "t" } else { "" };
    let bytes = if command.is_ascii() { "" } else { "b" };
    let flags = if traps.is_empty() && bytes.is_empty() { "" } else { " " };
    let length = command.len();
    format!(
        " \\__sk_pre {seq} {length}{flags}{traps}{bytes};\\builtin eval \"$__sk_c\";\\__sk_noedit"
    )
}

/// How a line is typed at the shell's prompt: what comes first, to discard
/// a partial line a program or a person left unread (a key without Enter),
/// and what ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Typing {
    start: Option<char>,
    end: char,
}

impl Typing {
    /// Into readline, or where how the shell reads cannot be seen: C-u,
    /// which the integration binds to `kill-whole-line`, and Enter.
    pub(crate) const EDITOR: Typing = Typing { start: Some('\x15'), end: '\r' };

    /// Into a shell that reads lines itself, as it does between the
    /// agent's commands (no line editor): the terminal's kill character
    /// `kill` (C-u, unless `stty kill` changed it), which only line mode
    /// knows (none in raw mode, or where the terminal has none), and a
    /// newline, which ends a line whatever `stty` changed (`-icrnl` makes
    /// Enter a plain character; raw mode does).
    pub(crate) fn lines(kill: Option<u8>) -> Typing {
        let start = kill.filter(u8::is_ascii).map(char::from);
        Typing { start, end: '\n' }
    }

    /// `body` typed this way.
    pub(crate) fn line(self, body: &str) -> String {
        let mut line = String::with_capacity(body.len() + 2);
        line.extend(self.start);
        line.push_str(body);
        line.push(self.end);
        line
    }
}

/// The line typed into a shell that printed its prompt while command
/// `seq` ran, with nothing of the integration having ended it (the `P`
/// marker `PS1` holds while a command runs): the shell itself sends the
/// command's end, with its status and the flag that says the
/// integration's prompt did not run. Typed as into readline
/// ([`Typing::EDITOR`]), a leading space, quoted words; the group sends a
/// trace and an error (the function removed) to `/dev/null`.
pub(crate) fn fallback_line(seq: u64) -> String {
    Typing::EDITOR.line(&format!(" {{ \\__sk_fallback {seq}; }} 2>/dev/null"))
}

/// The line typed into the shell at its idle prompt (as [`Typing`] says)
/// when a person who holds the session types there: `__sk_edit` turns line
/// editing back on for them (the agent's commands turn it off), leaves
/// `$?`, history and the command's report as they were, and prints the
/// marker that ends the echo of this line. As [`run_line`]: a leading
/// space, a quoted word; the function sends its own errors to `/dev/null`.
pub(crate) const EDIT_LINE: &str = " \\__sk_edit";

/// What the prompt last sent: the working directory and `PATH`, on the
/// completion channel (`session/channel.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShellState {
    /// The shell's working directory.
    pub cwd: PathBuf,
    /// The shell's `PATH`.
    pub path: String,
}

/// The Python interpreter a command named `python` (else `python3`) would
/// run with this `PATH`, as `command -v` would find it.
pub(crate) fn python_interpreter(path: &str) -> Option<PathBuf> {
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
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The command line bash would split back into exactly `words`: each
/// word as it is when bash would take it whole unquoted (`cargo`, `--release`,
/// `a/b.txt`), else single-quoted, as `printf %q` does; an empty word is
/// `''`. So `shellkeep run -- touch 'a b'` runs `touch 'a b'`, and the
/// policy sees the same line the shell runs.
pub fn command_line(words: &[String]) -> String {
    let plain = |word: &str| {
        !word.is_empty()
            && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b))
    };
    // A first word with `=` would be read as an assignment, not a program.
    let quoted: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(at, word)| {
            if plain(word) && (at > 0 || !word.contains('=')) {
                word.clone()
            } else {
                shell_quote(word)
            }
        })
        .collect();
    quoted.join(" ")
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "the tests run `bash -n` on the scripts")]
mod tests {
    use super::*;

    /// `bash -n` on a script given as text: it parses.
    fn parses(name: &str, script: &str) {
        let out = std::process::Command::new("bash")
            .args(["-n", "-c", script, name])
            .output()
            .expect("run bash -n");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn files(dir: &str) -> ShellFiles {
        ShellFiles { dir: PathBuf::from(dir) }
    }

    #[test]
    fn the_scripts_and_what_is_generated_from_them_parse() {
        parses("bash_rc.bash", RC_HEAD);
        parses("bash_script.bash", INTEGRATION);
        let files = files("/tmp/shellkeep-it's $(dir)");
        parses("rc", &rc_script(&files, Some(Path::new("/home/o'brien/.bashrc"))));
        parses("rc without a user file", &rc_script(&files, None));
        parses("reinstall", &reinstall_script(&files, 42, true));
        // A script that does not parse fails the check: it is no formality.
        let out = std::process::Command::new("bash")
            .args(["-n", "-c", &format!("{INTEGRATION}\n__sk_x() {{")])
            .output()
            .expect("run bash -n");
        assert!(!out.status.success());
    }

    #[test]
    fn the_start_up_file_reads_the_variables_the_server_sets() {
        assert!(RC_HEAD.contains(&format!("__sk_nonce=${{{NONCE_VAR}-}}")));
        assert!(RC_HEAD.contains(&format!(
            "exec {{__sk_f1}}>&\"${CHANNEL_VAR}\" {{__sk_f2}}<&\"${KEYS_VAR}\" \
             {{__sk_f3}}<&\"${COMMAND_VAR}\""
        )));
        assert!(RC_HEAD.contains(&format!(
            "exec 62>&\"$__sk_f1\" {KEYS_FD}<&\"$__sk_f2\" {COMMAND_FD}<&\"$__sk_f3\""
        )));
        assert!(
            RC_HEAD.contains(&format!("unset {NONCE_VAR} {CHANNEL_VAR} {KEYS_VAR} {COMMAND_VAR}"))
        );
    }

    /// The keys file holds what the integration binds where it is missing,
    /// and nobody can change it: not through the descriptor, not reopened.
    #[test]
    fn the_keys_file_holds_the_integrations_keys_and_is_sealed() {
        use std::io::Write;
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c"])
            .arg(format!(
                "{}\nprintf '%s\\n' \"${{__sk_keys[@]}}\"",
                reinstall_script(&files("/nonexistent"), 1, false)
            ))
            .output()
            .expect("run bash");
        assert_eq!(String::from_utf8_lossy(&out.stdout), KEYS);
        let fd = keys_file().expect("keys file");
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), KEYS);
        let mut file = std::fs::File::from(fd.try_clone().expect("clone"));
        assert!(file.write_all(b"\"\\C-m\": \"evil\"\n").is_err());
        let reopened = std::fs::OpenOptions::new().write(true).open(&path);
        assert!(reopened.and_then(|mut file| file.write_all(b"evil")).is_err());
        assert!(file.set_len(0).is_err());
        assert_eq!(std::fs::read_to_string(&path).expect("read"), KEYS);
    }

    /// Runs `probe` in a bash whose descriptor 60 reads `sent` (the
    /// writing end closed), after the typed reinstall line of handshake
    /// `seq` for a script of `length` bytes; returns what it printed.
    fn reinstalled(sent: &[u8], (seq, length): (u64, usize), probe: &str) -> String {
        use std::io::Write;
        let (mut server, shell) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        server.write_all(sent).expect("write the frame");
        drop(server);
        let line = reinstall_line(seq, length, "n0nce");
        let line = line.strip_prefix('\x15').and_then(|l| l.strip_suffix('\r')).expect("typed");
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &format!("exec 60<&0\n{line}\n{probe}")])
            .stdin(std::os::fd::OwnedFd::from(shell))
            .env("LANG", "C.UTF-8")
            .output()
            .expect("run bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The preamble's values arrive as they were, whatever they contain,
    /// and those a command must not change are read-only; the script comes
    /// whole from its frame on the command socket, counted in bytes.
    #[test]
    fn the_preamble_hands_its_values_to_the_script() {
        let dir = "/tmp/shellkeep-it's $(echo no) `x` \\ dir é";
        let script = reinstall_script(&files(dir), 42, false);
        let probe = "printf '%s\\n' \"$__sk_dir\" \"$__sk_seq\" \
             \"${__sk_dir_value-unset}${__sk_osc_value-unset}\" \"$__sk_osc\" \"$__sk_nonce\"; \
             echo \"${__sk_osc@a}${__sk_dir@a}${__sk_nonce@a}${__sk_r-gone}\"";
        let sent = command_frame(42, &script);
        let expected = format!("{dir}\n42\nunsetunset\n{MARKER_OSC}\nn0nce\nrrrgone\n");
        assert_eq!(reinstalled(&sent, (42, script.len()), probe), expected);
    }

    /// A frame that is not whole, or not the one the line asks for, runs
    /// nothing: not a part of the script, nor the frame of another number
    /// or length.
    #[test]
    fn the_reinstall_line_runs_only_its_own_whole_frame() {
        let script = reinstall_script(&files("/nonexistent"), 42, false);
        let probe = "echo \"${__sk_seq-none}\"";
        let sent = command_frame(42, &script);
        assert_eq!(reinstalled(&sent, (42, script.len()), probe), "42\n");
        // A thief took bytes from the middle, from the end, or the header.
        let middle = [&sent[..100], &sent[200..]].concat();
        assert_eq!(reinstalled(&middle, (42, script.len()), probe), "none\n");
        assert_eq!(reinstalled(&sent[..sent.len() - 1], (42, script.len()), probe), "none\n");
        assert_eq!(reinstalled(&sent[3..], (42, script.len()), probe), "none\n");
        // Another handshake's frame, or a length that does not match.
        assert_eq!(reinstalled(&sent, (43, script.len()), probe), "none\n");
        assert_eq!(reinstalled(&sent, (42, script.len() - 1), probe), "none\n");
        // The script knows the line as its own, to delete it from history.
        assert!(INTEGRATION.contains("__sk_unhist \"__sk_nonce=$__sk_nonce; IFS= \""));
        assert!(reinstall_line(42, 1, "n0nce").starts_with("\x15 { __sk_nonce=n0nce; IFS= "));
        // Code of its own in place of the script runs nothing either.
        let evil = command_frame(42, "echo evil");
        assert_eq!(reinstalled(&evil, (42, script.len()), "echo ${__sk_seq-none}"), "none\n");
    }

    /// A line is typed as the shell reads at that moment: C-u and Enter
    /// into readline; into a shell that reads lines itself, the terminal's
    /// kill character (none in raw mode, none that is not one byte) and a
    /// newline, which ends a line whatever `stty` changed.
    #[test]
    fn a_line_is_typed_as_the_shell_reads() {
        assert_eq!(Typing::EDITOR.line(" x"), "\x15 x\r");
        assert_eq!(Typing::lines(Some(0x15)).line(" x"), "\x15 x\n");
        assert_eq!(Typing::lines(Some(0x0b)).line(" x"), "\x0b x\n");
        assert_eq!(Typing::lines(None).line(" x"), " x\n");
        assert_eq!(Typing::lines(Some(0xff)).line(" x"), " x\n");
    }

    /// `__sk_load` called as the typed line calls it ([`run_line`]), on
    /// what the command socket holds; `None` when it loads nothing.
    fn loaded(sent: &[u8], seq: u64, text: &str) -> Option<String> {
        use std::io::Write;
        let (mut server, shell) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        server.write_all(sent).expect("write the frames");
        drop(server);
        let line = run_line(seq, text);
        let args = line.strip_prefix(" \\__sk_pre ").and_then(|l| l.split_once(';'));
        let (args, _) = args.expect("the typed line");
        let script = format!(
            "exec 60<&0\n{}\n__sk_load {args} && printf '<%s>' \"$__sk_c\" || echo none",
            integration(&files("/nonexistent"), 1, false)
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &script])
            .stdin(std::os::fd::OwnedFd::from(shell))
            .env("LANG", "C.UTF-8")
            .output()
            .expect("run bash");
        let out = String::from_utf8(out.stdout).expect("utf-8");
        out.strip_prefix('<').and_then(|o| o.strip_suffix('>')).map(str::to_owned)
    }

    /// The frame asked for comes whole, ASCII or not, after whole frames of
    /// earlier commands nobody read (at most 8, whatever their text), and
    /// in one piece or many; a frame a thief took bytes of, or frames of
    /// other numbers only, load nothing.
    #[test]
    fn the_shell_loads_only_its_own_whole_frame() {
        let ours = |text: &str| command_frame(7, text);
        let stale = |n: u64| command_frame(n, "echo é ünï stale");
        for text in ["echo hi", "echo é; echo ünï", "trap 'echo x' USR1", ""] {
            assert_eq!(loaded(&ours(text), 7, text).as_deref(), Some(text), "{text}");
            let after = [stale(5), stale(6), ours(text)].concat();
            assert_eq!(loaded(&after, 7, text).as_deref(), Some(text), "{text} after two");
        }
        let long = format!("echo {}", "é".repeat(40_000));
        assert_eq!(loaded(&ours(&long), 7, &long).as_deref(), Some(long.as_str()));
        let seven: Vec<u8> = (20..27).flat_map(stale).chain(ours("echo hi")).collect();
        assert_eq!(loaded(&seven, 7, "echo hi").as_deref(), Some("echo hi"));
        let eight: Vec<u8> = (20..28).flat_map(stale).chain(ours("echo hi")).collect();
        assert_eq!(loaded(&eight, 7, "echo hi"), None);
        let sent = ours("echo hi; echo there");
        let text = "echo hi; echo there";
        assert_eq!(loaded(&sent[3..], 7, text), None, "the header's first bytes taken");
        assert_eq!(loaded(&[&sent[..50], &sent[52..]].concat(), 7, text), None, "two bytes");
        assert_eq!(loaded(&sent[..sent.len() - 1], 7, text), None, "the last byte taken");
        assert_eq!(loaded(&command_frame(8, text), 7, text), None, "another number");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain"), "'plain'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    /// bash splits the line back into the very words, whatever they hold.
    #[test]
    fn a_command_line_of_words_splits_back_into_them() {
        let words: Vec<String> = [
            "printf",
            "<%s>",
            "a b",
            "",
            "it's",
            "$HOME",
            "`id`",
            "$(id)",
            "x\ny",
            "*",
            "~",
            "a;b",
            "--flag=1",
            "tab\there",
            "\\",
            "\"",
            "!x",
            "{a,b}",
            "é",
        ]
        .iter()
        .map(|w| (*w).to_owned())
        .collect();
        let line = command_line(&words);
        assert!(line.starts_with("printf '<%s>' 'a b' '' 'it'\\''s' '$HOME'"), "{line}");
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &line])
            .current_dir("/")
            .output()
            .expect("run bash");
        let expected: String = words[2..].iter().map(|w| format!("<{w}>")).collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
        assert_eq!(
            command_line(&["cargo".into(), "build".into(), "--release".into()]),
            "cargo build --release"
        );
        // A program named like an assignment stays a program.
        assert_eq!(command_line(&["A=1".into(), "x=2".into()]), "'A=1' x=2");
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
