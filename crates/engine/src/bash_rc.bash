# shellcheck shell=bash
# The head of the start-up file passed to a session's first shell
# (`bash --rcfile`), before the integration (`bash_script.bash`).
# `bash_script.rs` puts a preamble in front that sets `__sk_user_rc`: the
# user's start-up file to source (normally `~/.bashrc`), or nothing.
#
# The completion channel moves to descriptor 62, the sealed keys file to
# descriptor 61 and its end of the command socket to descriptor 60 before
# anything else runs (a plain `exec`: `builtin exec` would undo the
# redirection when it returns); `__SK_CHANNEL`, `__SK_KEYS` and `__SK_CMD`
# say where the shell got them. All pass through fresh descriptors first,
# so that none can land on another. The marker nonce
# moves from `__SK_NONCE` in the environment into a shell variable: it never
# touches a file. The variables are then unset. The user's start-up file
# is sourced before the integration, so that aliases and functions the user
# relies on exist, and our settings win.
exec {__sk_f1}>&"$__SK_CHANNEL" {__sk_f2}<&"$__SK_KEYS" {__sk_f3}<&"$__SK_CMD"
exec {__SK_CHANNEL}>&- {__SK_KEYS}<&- {__SK_CMD}<&-
exec 62>&"$__sk_f1" 61<&"$__sk_f2" 60<&"$__sk_f3" {__sk_f1}>&- {__sk_f2}<&- {__sk_f3}<&-
__sk_nonce=${__SK_NONCE-}
builtin unset __SK_NONCE __SK_CHANNEL __SK_KEYS __SK_CMD __sk_f1 __sk_f2 __sk_f3
if [[ -n $__sk_user_rc && -r $__sk_user_rc ]]; then
  # shellcheck source=/dev/null # the user's own file: not ours to check
  . "$__sk_user_rc"
fi
builtin unset __sk_user_rc
