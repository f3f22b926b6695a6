//! The bash integration's own files: the keys it binds again at every
//! prompt, and the state it writes over in place.

use shellkeep_engine::Outcome;

use crate::Term;

/// Runs `command` and checks its output and exit code.
async fn expect(term: &Term, command: &str, output: &str, code: i32) {
    let reply = term.run_for(command, 20.0).await;
    assert_eq!(
        (reply.output.text.as_str(), &reply.outcome),
        (output, &Outcome::Completed { exit_code: code }),
        "{command:?}: {reply:?}"
    );
}

/// A command that rebinds Enter, C-j or C-u would edit the line typed
/// for the next command: the prompt binds them again, from its keys file
/// (descriptor 61), or from its own list when the descriptor is closed.
#[tokio::test]
async fn the_keys_the_typed_line_needs_are_bound_again_with_or_without_their_file() {
    let term = Term::new("keys").await;
    let rebind = r#"bind '"\C-m": "echo hijack\n"' '"\C-j": "echo hijack\n"' '"\C-u": "x"'"#;
    for tamper in
        [rebind.to_owned(), format!("set -o vi; {rebind}"), format!("exec 61<&- && {rebind}")]
    {
        expect(&term, &tamper, "", 0).await;
        for _ in 0..2 {
            expect(&term, "echo ran-$((40 + 2))", "ran-42\n", 0).await;
        }
    }
    term.session.close().await;
}

/// The state file is written over in place: after a long directory and
/// `PATH`, shorter ones are read whole, without what the longer ones left
/// behind them (the session's directory and the Python interpreter come
/// from that file).
#[tokio::test]
async fn a_shorter_state_replaces_a_longer_one() {
    use std::os::unix::fs::PermissionsExt;
    let term = Term::new("state").await;
    let long = term.cwd().join("a-directory-with-a-name-longer-than-the-next-one");
    let short = term.cwd().join("p");
    for dir in [&long, &short] {
        std::fs::create_dir(dir).expect("dir");
        let python = dir.join("python");
        std::fs::write(&python, "").expect("write");
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let command = format!("cd '{0}' && PATH='{0}:/a/long/path/entry'", long.display());
    let reply = term.run_for(&command, 20.0).await;
    assert_eq!(reply.python, Some(long.join("python")), "{reply:?}");
    assert_eq!(term.session.cwd(), long);
    let reply = term.run_for(&format!("cd / && PATH='{}'", short.display()), 20.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert_eq!(reply.python, Some(short.join("python")), "{reply:?}");
    assert_eq!(term.session.cwd(), std::path::PathBuf::from("/"));
    term.session.close().await;
}

/// The values the integration takes from its preamble that place the
/// markers and the files are read-only: a command cannot move them.
#[tokio::test]
async fn a_command_cannot_change_where_the_integration_writes_or_what_it_marks() {
    let term = Term::new("readonly").await;
    for tamper in ["__sk_osc=1", "__sk_dir=/tmp", "__sk_nonce=x", "unset __sk_osc __sk_dir"] {
        term.run_for(tamper, 20.0).await;
        expect(&term, "echo ran-$((40 + 2))", "ran-42\n", 0).await;
    }
    expect(&term, "echo \"${__sk_osc@a}${__sk_dir@a}${__sk_nonce@a}\"", "rrr\n", 0).await;
    term.session.close().await;
}
