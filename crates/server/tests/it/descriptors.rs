//! Nothing the integration trusts is read from a path a command can write
//! (issue 19, item 2): end to end through the real binary, with the attacks
//! as they were found. A child that rewrites the keys file the prompt binds
//! from; a process left running that writes into every background job's
//! environment on its way; a child that rewrites the shell's state to claim
//! another working directory; a child that races to replace the next
//! command's text. Each runs as the session's own user, so it holds
//! everything that user can open.

use serde_json::json;

use crate::Server;

/// Finds the shell's private directory from its command line
/// (`--rcfile <dir>/init.sh`) and puts an Enter macro where the prompt
/// once read its keys: appended to every line shellkeep types, it would
/// redefine the end function to report exit 0. Then tries the keys file
/// the prompt now binds from, descriptor 61: through the shell's own
/// descriptor (`/proc/PPID/fd/61`) and its inherited copy, to write,
/// truncate or replace it. Prints what each attempt did.
const KEYS_POISON: &str = r#"
import os
ppid = os.getppid()
args = open(f"/proc/{ppid}/cmdline", "rb").read().split(b"\0")
rc = args[args.index(b"--rcfile") + 1].decode()
macro = (
    '"\\C-m": "\\C-e; __sk_end(){ builtin printf \'E;%s;0;;7\' \\"$__sk_seq\\" >&62; '
    '__sk_mark \\"E;$__sk_seq;7\\"; }\\C-j"\n"\\C-j": accept-line\n"\\C-u": unix-line-discard\n'
)
with open(os.path.join(os.path.dirname(rc), "keys"), "w") as f:
    f.write(macro)
for path in [f"/proc/{ppid}/fd/61", "/proc/self/fd/61"]:
    for flags in [os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC]:
        try:
            fd = os.open(path, flags)
            try:
                os.write(fd, macro.encode())
                print("WROTE", path)
            finally:
                os.close(fd)
        except OSError as err:
            print("refused", err.errno)
    try:
        os.truncate(path, 0)
        print("TRUNCATED", path)
    except OSError as err:
        print("refused", err.errno)
print("poisoned", flush=True)
"#;

/// F4 (a): a child that rewrites the keys the prompt binds from cannot
/// make later commands report exit 0; the keys file cannot be written,
/// whoever holds it.
#[tokio::test]
async fn a_child_rewriting_the_keys_file_cannot_forge_later_exit_codes() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("keys_poison.py"), KEYS_POISON).expect("script");
    let r = server.terminal(json!({"command": "python3 keys_poison.py", "timeout": 30})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    assert!(r.output().ends_with("poisoned\n"), "{r:#?}");
    assert!(!r.output().contains("WROTE") && !r.output().contains("TRUNCATED"), "{r:#?}");
    for (command, code, output) in [
        ("false", 1, ""),
        ("ls /nonexistent 2>/dev/null", 2, ""),
        ("sh -c 'exit 17'", 17, ""),
        ("echo still-$((6 * 7)); (exit 3)", 3, "still-42\n"),
    ] {
        let r = server.terminal(json!({"command": command, "timeout": 30})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64(), r.output()),
            (Some("completed"), Some(code), output),
            "{command}: {r:#?}"
        );
    }
}
