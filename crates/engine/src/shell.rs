//! The shell integration: the start-up file we give bash, the line we type
//! to run a command, and reading back the state bash leaves for us.
//!
//! Commands never go through readline. Each one is written to a private
//! file; the line we type reads it into a variable (`__sk_pre`, which also
//! prints the start marker) and `eval`s it at the top level, so it runs as
//! if typed at a prompt: syntax errors read like an interactive shell's,
//! `$?` is the previous command's status, a top-level `return` is refused
//! as at a prompt. `PROMPT_COMMAND` sends the end record with the exit
//! status on the completion channel and then prints the end marker, after
//! draining terminal input nobody read, and writes the
//! working directory and `PATH` to a state file (an `EXIT` trap writes it
//! too, so `cd X; exit` restarts in `X`). So the echo of what we type is
//! easy to drop (it comes before the start marker), any command text works
//! (tabs, `!`, `\;`, heredocs, 100 KB lines), our own commands stay out of
//! history, `set -u` cannot break the prompt, and `set -x` never traces our
//! functions: tracing is switched off in the prompt and back on inside the
//! `eval`, in groups whose trace goes to `/dev/null`.
//!
//! The same script, minus the user's start-up file, is what a nested or
//! replaced shell gets when the integration is reinstalled. No script
//! carries the marker nonce: the first shell takes it from its environment,
//! a reinstalled one from the typed line. The nonce is no secret anyway:
//! a command ends on the shell's record on the completion channel
//! (descriptor 62), and the marker only places the end in the output.
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
    /// The start-up file passed to `bash --rcfile`; deleted once sourced.
    pub fn rc_file(&self) -> PathBuf {
        self.dir.join("init.sh")
    }

    /// A file that reinstalls the integration in a shell that lost it;
    /// `id` keeps concurrent attempts apart. Deleted once sourced.
    pub fn reinstall_file(&self, id: u64) -> PathBuf {
        self.dir.join(format!("reinstall-{id}.sh"))
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

/// The environment variable that hands the first shell its marker nonce;
/// the start-up file moves it into a shell variable and unsets it.
pub const NONCE_VAR: &str = "__SK_NONCE";

/// The environment variable that tells the first shell at which descriptor
/// it got its end of the completion channel; the start-up file moves it to
/// descriptor 62 before anything else runs, and unsets the variable.
pub const CHANNEL_VAR: &str = "__SK_CHANNEL";

/// The start-up file. Its first lines move the completion channel to
/// descriptor 62 (a plain `exec`: `builtin exec` would undo the
/// redirection when it returns), before the user's start-up file runs.
/// The shell takes its marker nonce from
/// [`NONCE_VAR`] in its environment: the nonce never touches a file.
///
/// `user_rc` is sourced first when given (normally `~/.bashrc`), so that
/// aliases and functions the user relies on exist, and our settings win.
pub fn rc_script(files: &ShellFiles, user_rc: Option<&Path>) -> String {
    let user_rc = match user_rc {
        Some(path) => format!("[ -r {0} ] && . {0}\n", shell_quote(&path.to_string_lossy())),
        None => String::new(),
    };
    format!(
        "# shellkeep shell integration (generated).\n\
         if [[ ${{{CHANNEL_VAR}-62}} != 62 ]]; then\n  \
         exec 62>&\"${CHANNEL_VAR}\" {{{CHANNEL_VAR}}}>&-\nfi\n\
         __sk_nonce=${{{NONCE_VAR}-}}\nbuiltin unset {NONCE_VAR} {CHANNEL_VAR}\n{user_rc}{}",
        integration(files, 0)
    )
}

/// The script that reinstalls the integration in a shell that lost it (a
/// nested `bash`, `exec bash`); its first prompt reports `seq`, the
/// handshake. The user's start-up file is not read again: the shell
/// already read its own. It carries nothing secret: the nonce comes with
/// the typed line ([`reinstall_line`]).
pub fn reinstall_script(files: &ShellFiles, seq: u64) -> String {
    integration(files, seq)
}

/// The line typed into a shell that lost the integration to source
/// `script`, giving it the marker `nonce`. The leading space keeps it out
/// of history where `ignorespace` is on; the group sends `set -x` traces
/// and `set -v` echoes of the script to `/dev/null`.
pub fn reinstall_line(script: &Path, nonce: &str) -> String {
    format!(
        "\x15 {{ __sk_nonce={nonce}; . {}; }} 2>/dev/null\r",
        shell_quote(&script.to_string_lossy())
    )
}

fn integration(files: &ShellFiles, seq: u64) -> String {
    // Function by function:
    // - `__sk_post` (the last line of the `eval`, so that `eval` itself
    //   never fails: under `set -e` that would end the shell after an
    //   exempt failure such as `false && true`) keeps the status and the
    //   shell options, switches tracing and verbose mode off, and re-asserts
    //   PROMPT_COMMAND. Under `set -v` its line is echoed.
    // - `__sk_prompt` (from PROMPT_COMMAND, its trace and errors sent to
    //   /dev/null) does the same when `__sk_post` did not run (an interrupt),
    //   runs the user's own PROMPT_COMMAND, drains input nobody read
    //   (so it is never run as commands), writes the state file, puts back
    //   the keys our typed line relies on (a `bind` of Enter would edit
    //   it), and ends the command (`__sk_end`): first the record on the
    //   completion channel (descriptor 62; the kernel tells the server it
    //   comes from this shell's pid), then the marker in the output, which
    //   only says where the output ends.
    // - `__sk_ran` is emptied by `__sk_pre` and set by `__sk_on`, the first
    //   line the `eval` runs: a record whose command never reached the
    //   `eval` says so (flag `n`), and the reply says the integration is
    //   damaged instead of reporting a command that did not run.
    // - `__sk_pre N` prints the start marker and loads the command into
    //   `__sk_c`, after a first line `__sk_on` (tracing and verbose mode
    //   back on, `$?` restored). The command starts on a line of its own so
    //   that `set -v` echoes it.
    // - While a command runs, PS1 holds `__sk_fallback`, which ends the
    //   command from a subshell if PROMPT_COMMAND was cleared and the
    //   command was interrupted before `__sk_post` could restore it; the
    //   prompt empties PS1 again, so normally nothing forks. The subshell
    //   is a fork of the shell (same program image, parent the shell); it
    //   stays alive a moment after its record so the server can see that.
    //   Its `$?` is the status of the `eval`'s last line, `__sk_post`, when
    //   that ran (`__sk_posted`, emptied by `__sk_pre`): the command's
    //   status is then `__sk_last`. Its record carries the flag `f`, and
    //   the reply says the integration's prompt did not run.
    // - Without `__sk_post` (removed), nothing keeps the command's status:
    //   a record then carries the flag `d`, and the reply says its exit
    //   code may be wrong.
    // - `__sk_assert` keeps the user's PROMPT_COMMAND (a string or an
    //   array) for `__sk_prompt` to run. Where the user's value contains
    //   ours (`PROMPT_COMMAND="$PROMPT_COMMAND; hook"`, as `direnv hook`
    //   does), ours stands for the hooks kept so far; it is never kept
    //   itself, which would recurse. (`${#a[@]}` fails on a scalar under
    //   `set -u`, hence `${a@a}`.)
    // - `__sk_drain` reads at most 16 times 64 KiB of unread input, waiting
    //   20 ms each time, and only when `read -t 0` says a line is there.
    // - A command that mentions `trap` (`__sk_pre N t`) may have replaced
    //   our EXIT trap, which writes the state file when the shell exits:
    //   `__sk_keep_exit_trap` puts it back in front of the user's.
    // - Markers go to /dev/tty when standard output is not a terminal, so
    //   `exec >file` cannot swallow them.
    // - Under `set -e` any failing command of ours would end the shell,
    //   hence the `|| :`.
    // - Files are created with umask 077 (`__sk_private`), whatever the
    //   user's umask, when they do not exist yet.
    // - `__sk_dir` and `__sk_nonce` are read-only: a command cannot point
    //   the integration elsewhere.
    // - `set -e` makes a non-zero `$?` restore fatal, so it is restored only
    //   without `-e`.
    format!(
        r#"builtin set +H
builtin bind 'set enable-bracketed-paste off' 2>/dev/null
HISTCONTROL="ignorespace${{HISTCONTROL:+:$HISTCONTROL}}"
PS1='' PS2='' PS0=''
builtin readonly __sk_dir={dir} __sk_nonce 2>/dev/null
__sk_seq={seq}
__sk_last=0
__sk_ran=1
__sk_flags=
__sk_posted=
__sk_traps=
__sk_c=
__sk_pc='{{ __sk_prompt; }} 3>&2 2>/dev/null'
__sk_ps1='$({{ __sk_fallback; }} 2>/dev/null)'
__sk_upc=
__sk_mark() {{
  if [[ -t 1 ]]; then
    builtin printf '\e]{osc};%s;%s\a' "$__sk_nonce" "$1"
  else
    builtin printf '\e]{osc};%s;%s\a' "$__sk_nonce" "$1" >/dev/tty 2>/dev/null ||
      builtin printf '\e]{osc};%s;%s\a' "$__sk_nonce" "$1"
  fi
}}
__sk_end() {{
  local __sk_how=
  [[ -n ${{2-}} || -t 1 ]] || __sk_how=o
  [[ -n $__sk_ran ]] || __sk_how+=n
  [[ -z ${{2-}} ]] || __sk_how+=f
  builtin declare -F __sk_post >/dev/null || __sk_how+=d
  local __sk_tok=$(( ${{SRANDOM:-$RANDOM$RANDOM}} % 1000000000 ))
  builtin printf 'E;%s;%s;%s;%s' "$__sk_seq" "$1" "$__sk_how" "$__sk_tok" >&62 || :
  __sk_mark "E;$__sk_seq;$__sk_tok"
}} 2>/dev/null
__sk_private() {{
  local __sk_u
  [[ -e $1 ]] && return 0
  __sk_u=$(builtin umask) || :
  builtin umask 077
  : >>"$1" || :
  builtin umask "$__sk_u"
}} 2>/dev/null
__sk_state() {{
  __sk_private "$__sk_dir/state"
  builtin printf '%s\0%s\0' "$PWD" "$PATH" >|"$__sk_dir/state" || :
}} 2>/dev/null
__sk_drain() {{
  local __sk_junk __sk_n=0
  [[ -t 0 ]] || return 0
  while (( __sk_n < 16 )) && builtin read -t 0 2>/dev/null; do
    IFS= builtin read -r -s -d '' -N 65536 -t 0.02 __sk_junk 2>/dev/null || :
    __sk_n=$(( __sk_n + 1 ))
  done
}}
__sk_prompt() {{
  local __sk_status=$?
  if [[ -n $__sk_posted ]]; then
    __sk_status=$__sk_last
    __sk_posted=
  else
    __sk_flags=$-
    builtin set +xv
  fi
  __sk_last=$__sk_status
  if [[ -n $__sk_upc ]]; then builtin eval -- "$__sk_upc" 2>&3 3>&- || :; fi
  __sk_drain
  __sk_state
  PS1='' PS2='' PS0=''
  builtin bind '"\C-m": accept-line' '"\C-j": accept-line' '"\C-u": unix-line-discard' \
    2>/dev/null || :
  __sk_end "$__sk_last"
}}
__sk_assert() {{
  [[ -n ${{PROMPT_COMMAND+set}} ]] || PROMPT_COMMAND=
  if [[ $PROMPT_COMMAND != "$__sk_pc" || ${{PROMPT_COMMAND@a}} == *a* ]]; then
    local __sk_e __sk_u=
    for __sk_e in "${{PROMPT_COMMAND[@]}}"; do
      __sk_e=${{__sk_e//"$__sk_pc"/$__sk_upc}}
      __sk_e=${{__sk_e#"${{__sk_e%%[![:space:];]*}}"}}
      __sk_e=${{__sk_e%"${{__sk_e##*[![:space:];]}}"}}
      [[ -z $__sk_e ]] || __sk_u+="${{__sk_u:+$'\n'}}$__sk_e"
    done
    __sk_upc=$__sk_u
    builtin unset PROMPT_COMMAND
    PROMPT_COMMAND=$__sk_pc
  fi
}}
__sk_fallback() {{
  local __sk_status=$? __sk_junk
  [[ -z $__sk_posted ]] || __sk_status=$__sk_last
  __sk_state
  __sk_end "$__sk_status" fallback
  builtin read -r -t 0.3 -u 62 __sk_junk || :
}}
__sk_pre() {{
  __sk_seq=$1
  __sk_ran=
  __sk_posted=
  [[ -z ${{SHELLKEEP_SCOPE-}} ]] || builtin export SHELLKEEP_SCOPE="${{SHELLKEEP_SCOPE%%/c[0-9]*}}/c$1" || :
  __sk_traps=${{2-}}
  __sk_assert
  PS1=$__sk_ps1
  __sk_mark "S;$__sk_seq"
  IFS= builtin read -r -d '' __sk_c <"$__sk_dir/cmd" || :
  __sk_c="{{ __sk_on; }} 2>/dev/null"$'\n'"$__sk_c"$'\n''{{ __sk_post; }} 2>/dev/null'
  return 0
}}
__sk_on() {{
  local __sk_status=$__sk_last
  __sk_ran=1
  __sk_c=
  case $- in *e*) __sk_status=0;; esac
  case $__sk_flags in *v*) builtin set -v;; esac
  case $__sk_flags in *x*) builtin set -x;; esac
  return $__sk_status
}}
__sk_post() {{
  __sk_last=$?
  __sk_posted=1
  __sk_flags=$-
  builtin set +xv
  __sk_assert
  if [[ -n $__sk_traps ]]; then __sk_keep_exit_trap; fi
  return 0
}}
__sk_keep_exit_trap() {{
  local __sk_t= __sk_a=()
  __sk_private "$__sk_dir/trap"
  builtin trap -p EXIT >|"$__sk_dir/trap" || return 0
  IFS= builtin read -r -d '' __sk_t <"$__sk_dir/trap" || :
  [[ $__sk_t != *__sk_state* ]] || return 0
  builtin eval "__sk_a=($__sk_t)" || :
  builtin trap -- "__sk_state; ${{__sk_a[2]-}}" EXIT
}}
builtin trap '__sk_state' EXIT
__sk_assert
"#,
        dir = shell_quote(&files.dir.to_string_lossy()),
        osc = MARKER_OSC,
    )
}

/// The line typed into the shell to run command number `seq`, whose text
/// is `command`: it loads the command file and runs it with `eval` at the
/// top level. It starts with C-u, which discards a partial line a program
/// left unread (a key without Enter), in the terminal's line editing and in
/// readline alike. The leading space keeps it out of history; the group's
/// trace goes to `/dev/null`. Its words are quoted (`\builtin`) so that
/// aliases (`alias builtin=…` under `expand_aliases`) cannot replace them.
pub fn run_line(seq: u64, command: &str) -> String {
    let traps = if command.contains("trap") { " t" } else { "" };
    format!("\x15 {{ \\__sk_pre {seq}{traps}; }} 2>/dev/null; \\builtin eval -- \"$__sk_c\"\r")
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
