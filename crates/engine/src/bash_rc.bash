# shellcheck shell=bash
# The head of the start-up file passed to a session's first shell
# (`bash --rcfile`), before the integration (`bash_script.bash`).
# `bash_script.rs` puts a preamble in front that sets `__sk_user_rc`: the
# user's start-up file to source (normally `~/.bashrc`), or nothing.
#
# The completion channel moves to descriptor 62 and the sealed keys file to
# descriptor 61 before anything else runs (a plain `exec`: `builtin exec`
# would undo the redirection when it returns); `__SK_CHANNEL` and
# `__SK_KEYS` say where the shell got them. Both pass through fresh
# descriptors first, so that neither can land on the other. The marker nonce
# moves from `__SK_NONCE` in the environment into a shell variable: it never
# touches a file. Both variables are then unset. The user's start-up file
# is sourced before the integration, so that aliases and functions the user
# relies on exist, and our settings win.
exec {__sk_a}>&"$__SK_CHANNEL" {__sk_b}<&"$__SK_KEYS"
exec {__SK_CHANNEL}>&- {__SK_KEYS}<&-
exec 62>&"$__sk_a" 61<&"$__sk_b" {__sk_a}>&- {__sk_b}<&-
__sk_nonce=${__SK_NONCE-}
builtin unset __SK_NONCE __SK_CHANNEL __SK_KEYS __sk_a __sk_b
if [[ -n $__sk_user_rc && -r $__sk_user_rc ]]; then
  # shellcheck source=/dev/null # the user's own file: not ours to check
  . "$__sk_user_rc"
fi
builtin unset __sk_user_rc
