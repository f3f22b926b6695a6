//! Whether a command is complete or bash would wait for more lines, as at
//! its `>` prompt (an open quote, `if` without `fi`, a here-document without
//! its end, a trailing `\`, `&&` or `|`): a quick scan decides most
//! commands, and `bash -n` the ones that could be incomplete.
//!
//! It runs `bash -n` on the text (through a pipe, never a file) and nothing
//! else; it knows nothing of sessions, and an incomplete command is held by
//! the session (`session::incomplete`).

use std::path::Path;
use std::time::Duration;

/// Whether bash would wait for more lines after `command`, as at a `>`
/// prompt: an unclosed quote, `if` without `fi`, an unfinished here-document,
/// a trailing `\`, `&&` or `|`. Checked with `bash -n` (in the C locale, so
/// the messages are known) only when the text could be incomplete; a real
/// syntax error is not incomplete (running it shows bash's message).
///
/// Bounded: the text goes through a pipe; the check is given 5 s.
pub async fn is_incomplete(shell: &Path, command: &str) -> bool {
    if ends_with_continuation(command) {
        return true;
    }
    if !could_be_incomplete(command) {
        return false;
    }
    let mut check =
        crate::process::group_command(shell, &crate::process::Scope::new("syntax-check"));
    check
        .arg("--norc")
        .arg("--noprofile")
        .arg("-n")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let Ok(mut child) = crate::process::spawn(&mut check) else { return false };
    let input = child.stdin.take();
    let text = command.to_owned();
    let feed = async move {
        if let Some(mut stdin) = input {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.write_all(b"\n").await;
        }
    };
    let run = async {
        feed.await;
        child.wait_with_output().await
    };
    let Ok(Ok(output)) = tokio::time::timeout(Duration::from_secs(5), run).await else {
        return false;
    };
    let messages = String::from_utf8_lossy(&output.stderr);
    messages.contains("unexpected end of file")
        || messages.contains("unexpected EOF while looking for matching")
        || messages.contains("delimited by end-of-file")
}

/// A line ending in an odd number of backslashes continues on the next.
fn ends_with_continuation(command: &str) -> bool {
    let trailing = command.bytes().rev().take_while(|&b| b == b'\\').count();
    trailing % 2 == 1
}

/// Whether `command` could leave bash waiting for more: it has a
/// construct a quick scan cannot close (brackets, substitutions, keywords,
/// here-documents), an unclosed quote, or ends with an operator. Plain
/// commands with balanced quotes (`ls -la`, `git commit -m "msg"`) skip
/// the `bash -n` check. Errs on the side of checking.
fn could_be_incomplete(command: &str) -> bool {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut quote = Quote::None;
    let mut chars = command.chars().peekable();
    let mut word_start = true;
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match c {
                '\\' => {
                    chars.next();
                }
                '"' => quote = Quote::None,
                '`' => return true,
                '$' if chars.peek() == Some(&'(') => return true,
                _ => {}
            },
            Quote::None => match c {
                '\\' => {
                    chars.next();
                }
                '\'' => quote = Quote::Single,
                '"' => quote = Quote::Double,
                '#' if word_start => {
                    // A comment: quotes in it do not count.
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                '`' | '(' | ')' | '{' | '}' | '[' | '<' => return true,
                _ => {}
            },
        }
        word_start = quote == Quote::None && (c.is_whitespace() || matches!(c, ';' | '&' | '|'));
    }
    if quote != Quote::None {
        return true;
    }
    if command.trim_end().ends_with(['|', '&']) {
        return true;
    }
    command.split(|c: char| c.is_whitespace() || c == ';').any(|word| {
        matches!(
            word,
            "if" | "then"
                | "else"
                | "elif"
                | "do"
                | "case"
                | "while"
                | "until"
                | "for"
                | "select"
                | "function"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_that_can_open_a_construct_is_checked() {
        assert!(!could_be_incomplete("ls -la /tmp"));
        assert!(!could_be_incomplete("cargo test --workspace"));
        assert!(!could_be_incomplete("git commit -m \"it's done\" && echo 'ok'"));
        assert!(!could_be_incomplete("echo hi # don't"));
        assert!(could_be_incomplete("echo \"open"));
        assert!(could_be_incomplete("echo a &&"));
        assert!(could_be_incomplete("echo \"$(date\""));
        assert!(could_be_incomplete("echo 'x"));
        assert!(could_be_incomplete("cat << EOF"));
        assert!(could_be_incomplete("if true; then"));
        assert!(could_be_incomplete("for i in 1 2; do"));
        assert!(ends_with_continuation("echo a \\"));
        assert!(!ends_with_continuation("echo a \\\\"));
    }

    #[tokio::test]
    async fn incomplete_commands_are_recognised() {
        let bash = Path::new("bash");
        for text in [
            "echo 'abc",
            "echo \"abc",
            "if true; then",
            "cat << EOF",
            "cat << EOF\nline 1",
            "echo a &&",
            "echo a |",
            "f() {",
            "echo $(date",
            "for i in 1 2; do echo $i",
            "echo a \\",
        ] {
            assert!(is_incomplete(bash, text).await, "{text:?}");
        }
        for text in [
            "echo hi",
            "echo )",
            "fi",
            "cat << EOF\nline 1\nEOF",
            "if true; then echo y; fi",
            "echo 'a\nb'",
            "echo a \\\\",
        ] {
            assert!(!is_incomplete(bash, text).await, "{text:?}");
        }
    }
}
