# shellcheck shell=bash
# The shellkeep bash integration, sourced by the start-up file of a session's
# first shell and typed into a shell that lost it (a nested `bash`,
# `exec bash`). `bash_script.rs` puts a preamble of assignments in front:
# `__sk_seq` (the sequence number the first prompt reports), `__sk_osc_value`
# (the marker's OSC number), `__sk_dir_value` (the private directory) and
# `__sk_kf_value` (the keys file, `/dev/fd/61`, or nothing).
# `__sk_nonce` is set before: by the start-up file from its environment, or
# by the typed line that reads a reinstall script from the command socket
# (descriptor 60, never a file) and `eval`s it.
# shellcheck disable=SC2154 # __sk_osc_value, __sk_dir_value, __sk_kf_value and __sk_nonce come from outside, as above
#
# Not for: moving descriptors or sourcing the user's start-up file
# (`bash_rc.bash`), nor writing frames and typed lines (`bash_script.rs`).
# Only the shell's own pid is believed: a command ends on the record this
# shell sends on the completion channel (`__sk_end`). No command text touches
# the disk (`__sk_load`), and no file a command could rewrite carries anything
# we rely on. History never keeps a line of ours (`__sk_unhist`). Every
# function is read-only once defined (`readonly -f`, at the end). Under
# `set -e` any failing command of ours would end the shell, hence the `|| :`.
builtin set +H
builtin bind 'set enable-bracketed-paste off' 2>/dev/null
builtin bind 'set bind-tty-special-chars off' 2>/dev/null
# The typed lines start with a space and HISTCONTROL gets `ignorespace`
# (below). Where that does not hold (a nested shell before the integration is
# in it, whose `.bashrc` may leave HISTCONTROL empty; a command that unset
# it), `__sk_unhist` deletes the line from the history list as it runs,
# before any prompt can append it to the history file
# (`PROMPT_COMMAND='history -a'`) and before the shell can exit: the
# reinstall script at its top (just below), `__sk_pre` and `__sk_fallback`
# for their own lines. It deletes only the last entry, and only when that is
# the very line (it holds the nonce, or the function's name and the sequence
# number), never a user's.
__sk_unhist() {
  local __sk_h
  __sk_h=$(builtin history 1 2>/dev/null) || return 0
  [[ $__sk_h == *"$1"* ]] || return 0
  __sk_h=${__sk_h#"${__sk_h%%[![:space:]]*}"}
  __sk_h=${__sk_h%%[!0-9]*}
  [[ -z $__sk_h ]] || builtin history -d "$__sk_h" 2>/dev/null || :
}
[[ -z ${__sk_nonce-} ]] || __sk_unhist "__sk_nonce=$__sk_nonce; IFS= "
HISTCONTROL="ignorespace${HISTCONTROL:+:$HISTCONTROL}"
PS1='' PS2='' PS0=''
# `__sk_dir`, `__sk_osc`, `__sk_kf` and `__sk_nonce` are read-only: a command
# cannot point the integration elsewhere.
builtin readonly __sk_dir="$__sk_dir_value" __sk_osc="$__sk_osc_value" __sk_nonce 2>/dev/null
builtin readonly __sk_kf="$__sk_kf_value" 2>/dev/null
builtin readonly __sk_lines='\#' 2>/dev/null
builtin unset __sk_dir_value __sk_osc_value __sk_kf_value
__sk_last=0
__sk_ran=1
__sk_flags=
__sk_posted=
__sk_traps=
__sk_c=
__sk_pc='{ __sk_prompt; } 3>&2 2>/dev/null'
__sk_ps1="\\[\\e]$__sk_osc;$__sk_nonce;P;"
__sk_upc=
__sk_mode=emacs
__sk_off=
__sk_quiet=
# C-u, the first key of every line typed into readline, is `kill-whole-line`
# (see `Typing` in `bash_script.rs`): it empties the
# line wherever the cursor is, and rings no bell on an empty line
# (`unix-line-discard` does: a byte more for the server to read at every
# command). `bind-tty-special-chars` is off (at the top), or readline would
# bind C-u back to the terminal's kill character at every prompt.
__sk_keys=('"\C-m": accept-line' '"\C-j": accept-line' '"\C-u": kill-whole-line')
# Markers go to /dev/tty when standard output is not a terminal, so
# `exec >file` cannot swallow them.
__sk_mark() {
  if [[ -t 1 ]]; then
    builtin printf '\e]%s;%s;%s\a' "$__sk_osc" "$__sk_nonce" "$1"
  else
    builtin printf '\e]%s;%s;%s\a' "$__sk_osc" "$__sk_nonce" "$1" >/dev/tty 2>/dev/null ||
      builtin printf '\e]%s;%s;%s\a' "$__sk_osc" "$__sk_nonce" "$1"
  fi
}
# `__sk_end STATUS [fallback]` ends the command: first the state
# (`__sk_state`) and the record on the completion channel (descriptor 62,
# redirected once for both; the kernel tells the server they come from this
# shell's pid), then the marker in the output, which only says where the
# output ends. Flags in the record:
# - `o`: the shell's standard output is not the terminal (`exec >file`), so
#   its markers go to /dev/tty (`__sk_mark`).
# - `n`: `__sk_ran` is empty, the command never reached the `eval` (see
#   `__sk_on`): the reply says the integration is damaged instead of
#   reporting a command that did not run.
# - `f`: `__sk_fallback` ended it: the reply says the integration's prompt
#   did not run.
# - `d`: without `__sk_post` (removed), nothing keeps the command's status:
#   the reply says its exit code may be wrong. Once the functions are
#   read-only (`__sk_postok`) it cannot be removed, and is not looked for.
__sk_end() {
  local __sk_how=
  [[ -t 1 ]] || __sk_how=o
  [[ -n $__sk_ran ]] || __sk_how+=n
  [[ -z ${2-} ]] || __sk_how+=f
  [[ -n ${__sk_postok-} ]] || builtin declare -F __sk_post >/dev/null || __sk_how+=d
  local __sk_tok=$(( ${SRANDOM:-$RANDOM$RANDOM} % 1000000000 ))
  {
    __sk_state
    builtin printf 'E;%s;%s;%s;%s' "$__sk_seq" "$1" "$__sk_how" "$__sk_tok"
  } >&62 || :
  __sk_mark "E;$__sk_seq;$__sk_tok"
}
# `__sk_send K TEXT` sends TEXT on the completion channel (its caller sends
# standard output there, descriptor 62, once for all its writes: each
# redirection costs several system calls) in datagrams that
# start with the letter K, each written whole by one `printf`: at most 500
# characters (2,001 bytes, under the 4 KiB buffer of the shell's output), and
# a newline only at a piece's end (the shell's output is line-buffered: a
# newline inside would cut the datagram in two). With a third argument N,
# only the first N characters.
__sk_send() {
  local __sk_t=$2 __sk_p
  [[ -z ${3-} ]] || __sk_t=${__sk_t:0:$3}
  while [[ -n $__sk_t ]]; do
    __sk_p=${__sk_t:0:500}
    [[ $__sk_p != *$'\n'* ]] || __sk_p=${__sk_p%%$'\n'*}$'\n'
    builtin printf '%s%s' "$1" "$__sk_p" || return 1
    __sk_t=${__sk_t:${#__sk_p}}
  done
}
# The state (`__sk_state`: the working directory and `PATH`) goes to the
# server that way, never through a file a command could rewrite: `D` for the
# directory, `P` for `PATH`, then `C`, the commit; or, when both together are
# at most 1,000 characters without a newline (nearly always), one datagram
# `S`, the directory, a NUL and `PATH`. The server takes only a shell's own
# (the kernel names the sender) and at most 64 KiB of each field; a longer
# field is not taken (the shell sends one character more than 64 Ki of it, so
# that the server always sees it is longer).
__sk_state() {
  if (( ${#PWD} + ${#PATH} <= 1000 )) && [[ $PWD$PATH != *$'\n'* ]]; then
    builtin printf 'S%s\0%s' "$PWD" "$PATH" || :
  elif __sk_send D "$PWD" 65537 && __sk_send P "$PATH" 65537; then
    builtin printf 'C' || :
  fi
}
# `__sk_drain` reads input nobody read, so that it is never run as commands:
# at most 16 times 64 KiB, waiting 20 ms each time, and only when `read -t 0`
# says a line is there.
__sk_drain() {
  local __sk_junk __sk_n=0
  [[ -t 0 ]] || return 0
  while (( __sk_n < 16 )) && builtin read -t 0; do
    IFS= builtin read -r -s -d '' -N 65536 -t 0.02 __sk_junk || :
    __sk_n=$(( __sk_n + 1 ))
  done
}
# `__sk_settle STATUS`, which `__sk_prompt` and `__sk_fallback` share, does
# what `__sk_post` does when that did not run (an interrupt): keeps the status
# and the shell options, and switches tracing and verbose mode off. STATUS is
# the caller's `$?`: the command's status, or that of the `eval`'s last line,
# `__sk_post`, when that ran (`__sk_posted`, emptied by `__sk_pre`): the
# command's status is then `__sk_last`.
__sk_settle() {
  if [[ -n $__sk_posted ]]; then
    __sk_posted=
  else
    __sk_last=$1
    __sk_flags=$-
    builtin set +xv
  fi
}
# `__sk_prompt` (from PROMPT_COMMAND, its trace and errors sent to /dev/null)
# settles the status (`__sk_settle`), runs the user's own PROMPT_COMMAND,
# drains input nobody read, puts back the keys our typed line relies on where
# readline reads the next line (`__sk_bind`), and ends the command
# (`__sk_end`, which also sends the state) with a read-only copy of the
# status: the user's PROMPT_COMMAND, which runs before, cannot change it.
# After `__sk_edit` it does nothing at all (`__sk_quiet`): no command ended,
# and the keys a person typed next wait in the input, not to be drained.
#
# Each redirection costs the shell several system calls, and these run for
# every command: the functions the prompt calls have none of their own, since
# `__sk_prompt` and `__sk_fallback` are only ever called with standard error
# sent to /dev/null (PROMPT_COMMAND and the typed line hold the redirection);
# the EXIT trap carries its own.
__sk_prompt() {
  local __sk_s=$?
  if [[ -n $__sk_quiet ]]; then
    __sk_quiet=
    return 0
  fi
  __sk_settle "$__sk_s"
  local -r __sk_final=$__sk_last
  if [[ -n $__sk_upc ]]; then builtin eval -- "$__sk_upc" 2>&3 3>&- || :; fi
  if [[ -t 0 ]] && builtin read -t 0; then __sk_drain; fi
  PS1='' PS2='' PS0=''
  if [[ -o emacs || -o vi ]]; then __sk_bind; fi
  __sk_end "$__sk_final"
}
# `__sk_noedit`, the last word of the typed line, turns line editing off
# once the command ran, remembering its mode (`__sk_mode`) and that it was on
# (`__sk_off`); `__sk_pre` puts it back on for the next command, which sees
# the shell as it was (`set -o`, `bind`, `read -e`). Nobody but the agent
# types between its commands, and without readline the shell reads our next
# typed line whole, in one read, with the terminal's own echo, where readline
# would read it a byte at a time, with three system calls for each, and set
# the terminal up and back at every prompt. Where the switch is made matters:
# bash reads a command's text through `eval` (and PROMPT_COMMAND) from a
# string, and a switch made there would send the rest of that string's
# reading to the terminal (as a command's own `set +o emacs` still does: bash
# does that to any `eval`); the typed line's own words run once the whole line
# was read, and with editing on during the command a command's `set -o vi` is
# safe. A command that chose `vi` has `vi`. It switches only after a command
# whose `eval` ran to its end (`__sk_posted`): after a syntax error, bash 5.2
# reads its next
# line without having made its prompt for that mode, and a shell that never
# read a line without editing before crashes there (a null prompt). An
# interrupted command leaves it on too (the line's last word never runs), and
# the next line is typed as into readline. `$?` stays the `eval`'s (a syntax
# error's 2).
__sk_noedit() {
  local __sk_s=$?
  if [[ -z $__sk_posted ]]; then
    return $__sk_s
  elif [[ -o emacs || -o vi ]]; then
    if [[ -o vi ]]; then __sk_mode='vi'; else __sk_mode='emacs'; fi
    builtin set +o emacs +o vi
    __sk_off=1
  else
    __sk_off=
  fi
  return $__sk_s
}
# `__sk_bind` puts back the keys our typed lines rely on (a `bind` of Enter
# would edit them) where the shell edits lines. From a file (`bind -f`):
# `bind` with bindings as arguments walks the whole keymap twice for each,
# looking for `bind -x` bindings it replaced. The file is no path a command can
# write: it is `__sk_kf`, descriptor 61 (`/dev/fd/61`), a sealed memory file
# the server made and handed to the first shell (nobody can change it, whoever
# holds it), and that a nested shell inherits; the preamble leaves `__sk_kf`
# empty where the server did not find that very file at 61. Without it
# (empty, or a command closed the descriptor) they are bound from
# `__sk_keys`. (The file also becomes the one `re-read-init-file`, C-x C-r,
# reads.)
__sk_bind() {
  if [[ -z $__sk_kf ]] || ! builtin bind -f "$__sk_kf"; then builtin bind "${__sk_keys[@]}" || :; fi
}
# `__sk_edit`, typed by the server when a person attached for writing types
# at the idle prompt, turns line editing back on for them where the agent's
# line turned it off (`__sk_noedit`), in the mode the shell had, until the
# agent's next line; it leaves `$?`, the history and the command's report
# as they were, and prints the marker `L`, which tells the server that the
# echo of its line is over. The prompt that follows does nothing
# (`__sk_quiet`).
__sk_edit() {
  local __sk_s=$?
  case :${HISTCONTROL-}: in
    *:ignorespace:* | *:ignoreboth:*) ;;
    *) __sk_unhist "\\__sk_edit" ;;
  esac
  if [[ -n $__sk_off ]] && ! [[ -o emacs || -o vi ]]; then
    builtin set -o "$__sk_mode"
    __sk_bind
  fi
  __sk_quiet=1
  __sk_mark L
  return $__sk_s
} 2>/dev/null
# `__sk_assert` keeps the user's PROMPT_COMMAND (a string or an array) for
# `__sk_prompt` to run. Where the user's value contains ours
# (`PROMPT_COMMAND="$PROMPT_COMMAND; hook"`, as `direnv hook` does), ours
# stands for the hooks kept so far; it is never kept itself, which would
# recurse. (`${#a[@]}` fails on a scalar under `set -u`, hence `${a@a}`.)
__sk_assert() {
  [[ -n ${PROMPT_COMMAND+set} ]] || PROMPT_COMMAND=
  if [[ $PROMPT_COMMAND != "$__sk_pc" || ${PROMPT_COMMAND@a} == *a* ]]; then
    local __sk_e __sk_u=
    for __sk_e in "${PROMPT_COMMAND[@]}"; do
      __sk_e=${__sk_e//"$__sk_pc"/$__sk_upc}
      __sk_e=${__sk_e#"${__sk_e%%[![:space:];]*}"}
      __sk_e=${__sk_e%"${__sk_e##*[![:space:];]}"}
      [[ -z $__sk_e ]] || __sk_u+="${__sk_u:+$'\n'}$__sk_e"
    done
    __sk_upc=$__sk_u
    builtin unset PROMPT_COMMAND
    PROMPT_COMMAND=$__sk_pc
  fi
}
# While a command runs, PS1 holds a marker, `P;<seq>` (escape sequences only:
# printing it forks nothing). The integration's prompt empties PS1 before
# bash prints it, so the marker shows only when PROMPT_COMMAND did not end the
# command (cleared, and the command interrupted before `__sk_post` could
# restore it; `__sk_prompt` removed). The server, seeing the shell itself read
# the terminal after that marker, types `__sk_fallback <seq>`, which ends the
# command from the shell process itself, as `__sk_prompt` would. It acts only
# for the command running (`<seq>`), and the server types it once per command.
# The prompt that follows the typed line would run PROMPT_COMMAND again (what
# did not end the command, maybe slowly: a missing function runs
# `command_not_found_handle`) after the end was sent, while the next command
# may already be on its way: it is skipped that once (`__sk_fbpc` keeps it),
# and `__sk_pre` puts it back as it was.
__sk_fallback() {
  local __sk_status=$?
  [[ ${1-} == "$__sk_seq" ]] || return 0
  case :${HISTCONTROL-}: in
    *:ignorespace:* | *:ignoreboth:*) ;;
    *) __sk_unhist "\\__sk_fallback $1;" ;;
  esac
  __sk_settle "$__sk_status"
  __sk_drain
  PS1='' PS2='' PS0=''
  if [[ -n ${PROMPT_COMMAND-} && ${PROMPT_COMMAND@a} != *[ar]* ]]; then
    __sk_fbpc=$PROMPT_COMMAND
    PROMPT_COMMAND=
  fi
  __sk_end "$__sk_last" fallback
}
# `__sk_pre N LENGTH [FLAGS]` prints the start marker and loads command N,
# whose text is LENGTH bytes, into `__sk_c`, after a first line `__sk_on`.
# The command starts on a line of its own so that `set -v` echoes it. FLAGS:
# `t`, the command mentions `trap` (see `__sk_keep_exit_trap`); `b`, its text
# is not all ASCII (so `__sk_load` counts it in the C locale, where `read -N`
# counts bytes: setting the locale costs as much as a read).
#
# The start marker carries the shell's count of the command lines it has read
# (`\#` in a prompt, from the read-only `__sk_lines`): every command is one
# line typed, so a larger step says that lines ran at the prompt that nobody
# typed (pushed into the shell's input), even ones that emptied PROMPT_COMMAND
# so that no end record told.
#
# It also puts line editing back on where `__sk_noedit` turned it off, and
# forgets a `__sk_edit` whose prompt never ran (`__sk_quiet`).
__sk_pre() {
  case :${HISTCONTROL-}: in
    *:ignorespace:* | *:ignoreboth:*) ;;
    *) __sk_unhist "\\__sk_pre $1 ${2-}${3:+ $3};" ;;
  esac
  __sk_seq=$1
  __sk_ran=
  __sk_quiet=
  if [[ -n $__sk_off ]]; then builtin set -o "$__sk_mode"; fi
  __sk_posted=
  [[ -z ${SHELLKEEP_SCOPE-} ]] || builtin export SHELLKEEP_SCOPE="${SHELLKEEP_SCOPE%%/c[0-9]*}/c$1" || :
  __sk_traps=
  [[ ${3-} != *t* ]] || __sk_traps=t
  if [[ -n ${__sk_fbpc+set} ]]; then
    PROMPT_COMMAND=$__sk_fbpc
    builtin unset __sk_fbpc
  fi
  [[ ${PROMPT_COMMAND-} == "$__sk_pc" && ${PROMPT_COMMAND@a} != *a* ]] || __sk_assert
  PS1="$__sk_ps1$1\\a\\]"
  __sk_mark "S;$__sk_seq;${__sk_lines@P}"
  if ! __sk_load "$1" "${2-}" "${3-}"; then
    __sk_c=
  elif [[ $__sk_flags == *x* ]]; then
    __sk_c="{ __sk_on; } 2>/dev/null"$'\n'"$__sk_c"$'\n''{ __sk_post; } 2>/dev/null'
  else
    __sk_c="__sk_on"$'\n'"$__sk_c"$'\n''{ __sk_post; } 2>/dev/null'
  fi
  return 0
} 2>/dev/null
# `__sk_load N LENGTH FLAGS` reads command N's frame from descriptor 60, the
# shell's end of a socket pair whose other end only the server holds: never
# through a file, so no other process can replace it, and a value typed into a
# command never touches the disk. A child that inherited the descriptor can
# take bytes out, but what it writes there goes to the server, never to the
# shell (and a socket, unlike a pipe, cannot be opened again through `/proc`).
#
# A frame is a header of 42 bytes (the number and LENGTH, each as 20 digits, a
# space between, a newline after), then LENGTH bytes of text. The typed line
# gives N and LENGTH, so a frame of at most 64 KiB comes with one `read -N`
# (in the C locale only when the text is not ASCII: FLAGS has `b`). Else, or
# when that is not the frame asked for, the bytes are parsed as frames in the
# C locale (`__sk_fill` reads what is missing): whole frames of earlier
# commands that nobody read (at most 8) are skipped; anything else (a frame a
# thief took bytes of) loads nothing and is flushed (`__sk_flush`), and the
# command is reported as never run (the record's flag `n`), never as
# completed. Reads of at most 64 KiB wait 10 s at most (a frame a thief took
# whole never comes); a longer text is read without a timeout, since `read -t`
# reads a byte at a time.
__sk_load() {
  local __sk_b="" __sk_h
  __sk_c=
  [[ -n $1 && -n $2 && $1$2 != *[!0-9]* && ${#2} -le 9 ]] || return 1
  if (( 10#$2 <= 65536 )); then
    [[ $3 != *b* ]] || local LC_ALL=C
    IFS= builtin read -r -N $(( 42 + 10#$2 )) -t 10 -u 60 __sk_b || [[ -n $__sk_b ]] || return 1
    builtin printf -v __sk_h '%020d %020d\n' "$(( 10#$1 ))" "$(( 10#$2 ))"
    if [[ ${__sk_b:0:42} == "$__sk_h" ]] && (( ${#__sk_b} == 42 + 10#$2 )); then
      __sk_c=${__sk_b:42}
      return 0
    fi
  fi
  __sk_parse "$1"
}
# `__sk_parse N` parses what `__sk_load` read (its `__sk_b`) as frames, in
# the C locale, and reads the rest (`__sk_fill`), as `__sk_load` says.
__sk_parse() {
  local __sk_h __sk_s __sk_n __sk_k=0 LC_ALL=C
  while (( __sk_k++ < 8 )); do
    __sk_fill 42 || return 1
    __sk_h=${__sk_b:0:42}
    __sk_s=${__sk_h:0:20} __sk_n=${__sk_h:21:20}
    if [[ ${__sk_h:20:1} != ' ' || ${__sk_h:41} != $'\n' || $__sk_s$__sk_n == *[!0-9]* ]]; then
      __sk_flush
      return 1
    fi
    __sk_s=$((10#$__sk_s)) __sk_n=$((10#$__sk_n))
    if ! __sk_fill $(( 42 + __sk_n )); then
      __sk_flush
      return 1
    fi
    if (( __sk_s == 10#$1 )); then
      __sk_c=${__sk_b:42:__sk_n}
      return 0
    fi
    __sk_b=${__sk_b:42 + __sk_n}
  done
  return 1
}
# `__sk_fill N` reads from descriptor 60 until `__sk_load`'s buffer holds N
# bytes (it runs in the C locale): what is missing, with a timeout of 10 s
# when that is at most 64 KiB. Fails when they do not come.
__sk_fill() {
  local __sk_m __sk_r=
  __sk_m=$(( $1 - ${#__sk_b} ))
  (( __sk_m > 0 )) || return 0
  if (( __sk_m <= 65536 )); then
    IFS= builtin read -r -N "$__sk_m" -t 10 -u 60 __sk_r || :
  else
    IFS= builtin read -r -N "$__sk_m" -u 60 __sk_r || :
  fi
  __sk_b+=$__sk_r
  (( ${#__sk_b} >= $1 ))
}
# `__sk_flush` throws away what is left on descriptor 60: at most 16 times
# 64 KiB.
__sk_flush() {
  local __sk_j __sk_i=0
  while (( __sk_i++ < 16 )) && builtin read -t 0 -u 60; do
    IFS= builtin read -r -N 65536 -t 0.02 -u 60 __sk_j || :
  done
}
# `__sk_on`, the first line the `eval` runs, sets `__sk_ran` (which `__sk_pre`
# empties), switches tracing and verbose mode back on, and restores `$?`.
# `set -e` makes a non-zero `$?` restore fatal, so it is restored only
# without `-e`.
__sk_on() {
  local __sk_status=$__sk_last
  __sk_ran=1
  __sk_c=
  case $- in *e*) __sk_status=0;; esac
  case $__sk_flags in *v*) builtin set -v;; esac
  case $__sk_flags in *x*) builtin set -x;; esac
  return $__sk_status
}
# `__sk_post` is the last line of the `eval`, so that `eval` itself never
# fails: under `set -e` that would end the shell after an exempt failure such
# as `false && true`. It keeps the status and the shell options, switches
# tracing and verbose mode off, and re-asserts PROMPT_COMMAND. Under `set -v`
# its line is echoed.
__sk_post() {
  __sk_last=$?
  __sk_posted=1
  __sk_flags=$-
  builtin set +xv
  [[ ${PROMPT_COMMAND-} == "$__sk_pc" && ${PROMPT_COMMAND@a} != *a* ]] || __sk_assert
  if [[ -n $__sk_traps ]]; then __sk_keep_exit_trap; fi
  return 0
}
# A command that mentions `trap` (`__sk_pre N t`) may have replaced our EXIT
# trap: `__sk_keep_exit_trap` puts it back in front of the user's. It reads
# the trap from a command substitution (which still shows the shell's traps),
# never from a file a command could rewrite before it is `eval`ed.
__sk_keep_exit_trap() {
  local __sk_t='' __sk_a=()
  __sk_t=$(builtin trap -p EXIT) || return 0
  [[ $__sk_t != *__sk_state* ]] || return 0
  builtin eval "__sk_a=($__sk_t)" || :
  builtin trap -- "{ __sk_state; } >&62 2>/dev/null; ${__sk_a[2]-}" EXIT
}
# The EXIT trap sends the state when the shell exits.
builtin trap '{ __sk_state; } >&62 2>/dev/null' EXIT
__sk_assert
# `readonly -f`: a command, or a line pushed into the idle shell's input
# (legacy TIOCSTI), can neither redefine nor remove a function, so none can
# report an end the command did not reach. A shell gets the functions once: a
# nested shell or one `exec` replaced starts without them.
builtin readonly -f __sk_unhist __sk_mark __sk_end __sk_send __sk_state \
  __sk_drain __sk_settle __sk_prompt __sk_noedit __sk_bind __sk_edit __sk_assert \
  __sk_fallback __sk_pre __sk_load __sk_parse __sk_fill __sk_flush __sk_on __sk_post \
  __sk_keep_exit_trap 2>/dev/null
# `__sk_post` cannot be removed once it is read-only: `__sk_end` need not look.
builtin declare -F __sk_post >/dev/null && builtin readonly __sk_postok=1 2>/dev/null
