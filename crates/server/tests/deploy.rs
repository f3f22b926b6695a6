//! Deploy: the examples in `deploy/` cannot drift from the binary. Every
//! `shellkeep` flag they use exists in the help of the subcommand that
//! takes it, and the image's Rust toolchain is not older than the
//! workspace's `rust-version`.
//!
//! The flags are read from the files, each as the command line it ends up
//! on:
//! - a line that runs `shellkeep SUBCOMMAND …`, where SUBCOMMAND is one
//!   that `shellkeep --help` lists (the Dockerfile's `ENTRYPOINT` array, a
//!   comment's example command): every `--flag` after the subcommand on
//!   that line, for that subcommand;
//! - the items of a Kubernetes container's `args:` list, which are added to
//!   the image's entrypoint: `serve`'s;
//! - a flag named in prose, written in backticks as `` `--flag` `` or
//!   `` `--flag VALUE` ``: `serve`'s too, since that is the command line the
//!   deploy files configure. A backticked span that starts with another
//!   program's name (`` `docker run --init` ``) is not ours.
//!
//! The binary is `$SHELLKEEP_BIN` when set (a build with flags this one
//! lacks, say), else the one Cargo built. The help's flags are the
//! `--name`s that open an option line of
//! `shellkeep SUBCOMMAND --help`; its subcommands, the names that open the
//! lines of `shellkeep --help`'s `Commands:`. The reading is plain functions; the tests
//! at the bottom feed them small files that must and must not yield flags,
//! so that a reader that finds nothing cannot pass unnoticed.
//!
//! What this does not check: that the image builds (no registry for base
//! images here) nor that the manifests apply; `scripts/lint-deploy` lints
//! them.

#![allow(clippy::disallowed_methods, reason = "the test reads the help of the binary it built")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The files of `deploy/` that configure shellkeep.
const DEPLOY_FILES: [&str; 4] =
    ["deploy/Dockerfile", "deploy/kubernetes.yaml", "deploy/Caddyfile", "deploy/nginx.conf"];

#[test]
fn every_flag_the_deploy_files_use_is_in_the_help() {
    let root = workspace();
    let subcommands = help_subcommands(&help(None));
    assert!(
        subcommands.contains("serve") && subcommands.contains("doctor"),
        "`shellkeep --help` lists no serve or no doctor: its output is not read right \
         ({subcommands:?})"
    );
    let mut uses = Vec::new();
    for file in DEPLOY_FILES {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|error| panic!("{file} cannot be read: {error}"));
        uses.extend(
            flag_uses(&text, &subcommands).into_iter().map(|(line, subcommand, flag)| Use {
                file,
                line,
                subcommand,
                flag,
            }),
        );
    }
    for needed in ["--http", "--allow-remote"] {
        assert!(
            uses.iter().any(|u| u.flag == needed),
            "no deploy file uses {needed}: the reader misses the Dockerfile's entrypoint"
        );
    }
    let mut helps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for used in &uses {
        let known = helps.entry(used.subcommand.clone()).or_insert_with(|| {
            let flags = help_flags(&help(Some(&used.subcommand)));
            assert!(
                flags.contains("--help"),
                "`shellkeep {} --help` lists no --help: its output is not read right",
                used.subcommand
            );
            flags
        });
        if !known.contains(&used.flag) {
            unknown.push(format!(
                "  {}:{}: {} is not an option of `shellkeep {}`\n",
                used.file, used.line, used.flag, used.subcommand
            ));
        }
    }
    assert!(
        unknown.is_empty(),
        "{} flag(s) of the deploy files are not in the help; fix the file, or the flag:\n{}",
        unknown.len(),
        unknown.concat()
    );
}

#[test]
fn the_image_builds_with_the_workspace_rust_version_or_newer() {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let dockerfile =
        std::fs::read_to_string(root.join("deploy/Dockerfile")).expect("deploy/Dockerfile");
    let wanted = manifest_rust_version(&manifest).expect("a rust-version in Cargo.toml");
    let image = dockerfile_rust_version(&dockerfile)
        .expect("an `ARG RUST_VERSION=…` in deploy/Dockerfile, used by its builder's FROM");
    assert!(
        image >= wanted,
        "deploy/Dockerfile builds with Rust {image:?}, older than the workspace's \
         rust-version {wanted:?}: raise its RUST_VERSION"
    );
}

// ---------------------------------------------------------------------------
// The check.

/// One flag a deploy file uses.
#[derive(Debug)]
struct Use {
    /// The file, relative to the repository.
    file: &'static str,
    /// Its line, from 1.
    line: usize,
    /// The subcommand that must take the flag.
    subcommand: String,
    /// The flag, as `--name`.
    flag: String,
}

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `shellkeep [SUBCOMMAND] --help`, from `$SHELLKEEP_BIN` when set (as
/// for the integration tests), else from the binary the tests built.
fn help(subcommand: Option<&str>) -> String {
    let args: Vec<&str> = subcommand.into_iter().chain(["--help"]).collect();
    let binary = std::env::var_os("SHELLKEEP_BIN")
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_shellkeep")), PathBuf::from);
    let output = Command::new(binary).args(&args).output().expect("the shellkeep binary starts");
    assert!(
        output.status.success(),
        "`shellkeep {}` failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the help is UTF-8")
}

/// The subcommands a help text lists: the first word of each line of its
/// `Commands:` section, up to the first line that is not indented.
fn help_subcommands(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The flags a help text lists: the `--name` that opens each option line
/// (`  -h, --help`, `      --policy <POLICY>`); flags named in the
/// descriptions do not count.
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let entry = line.trim_start();
            // A short flag first: `-h, --help`.
            let entry = match entry.as_bytes() {
                [b'-', short, b',', b' ', ..] if *short != b'-' => &entry[4..],
                _ => entry,
            };
            entry.starts_with("--").then(|| flag_name(entry).to_owned())
        })
        .filter(|flag| flag.len() > 2)
        .collect()
}

/// The flag at the start of `text` (which starts with `--`): up to the
/// first character that cannot be in a flag's name (`=`, a space, `<`).
fn flag_name(text: &str) -> &str {
    let end = text[2..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .map_or(text.len(), |at| at + 2);
    &text[..end]
}

/// Every shellkeep flag `text` uses: its line (from 1), the subcommand that
/// must take it, and the flag; `subcommands` are shellkeep's. See the
/// module's comment for what counts.
fn flag_uses(text: &str, subcommands: &BTreeSet<String>) -> Vec<(usize, String, String)> {
    let mut uses = Vec::new();
    let mut in_args: Option<usize> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        // A Kubernetes `args:` list: its items, until a line no deeper than
        // the key.
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if let Some(key_indent) = in_args {
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if indent > key_indent || (indent == key_indent && trimmed.starts_with("- ")) {
                let item = trimmed.trim_start_matches("- ").trim().trim_matches(['"', '\'']);
                if item.starts_with("--") {
                    uses.push((number, "serve".to_owned(), flag_name(item).to_owned()));
                }
                continue;
            }
            in_args = None;
        }
        if trimmed == "args:" {
            in_args = Some(indent);
            continue;
        }
        // A command line: `shellkeep SUBCOMMAND …`, words split at spaces
        // and at the punctuation of a JSON array or a shell line. Prose
        // that starts with the program's name (`shellkeep is PID 1`) names
        // no subcommand.
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '[' | ']' | '`'))
            .filter(|w| !w.is_empty())
            .collect();
        let mut from = None;
        for (at, pair) in words.windows(2).enumerate() {
            if pair[0] == "shellkeep" && subcommands.contains(pair[1]) {
                from = Some((at + 2, pair[1]));
                break;
            }
        }
        if let Some((start, subcommand)) = from {
            for word in &words[start..] {
                if word.starts_with("--") && word.len() > 2 {
                    uses.push((number, subcommand.to_owned(), flag_name(word).to_owned()));
                }
            }
            continue;
        }
        // Prose: a backticked span that starts with a flag.
        for (at, span) in line.split('`').enumerate() {
            if at % 2 == 1 && span.starts_with("--") && span.len() > 2 {
                uses.push((number, "serve".to_owned(), flag_name(span).to_owned()));
            }
        }
    }
    uses
}

/// A version as numbers: `1.88` is `[1, 88]`, `1.88.0` is `[1, 88, 0]`.
fn version(text: &str) -> Option<Vec<u32>> {
    text.split('.').map(|part| part.parse().ok()).collect()
}

/// The `rust-version` of the workspace's Cargo.toml.
fn manifest_rust_version(manifest: &str) -> Option<Vec<u32>> {
    manifest.lines().find_map(|line| {
        let value = line.trim().strip_prefix("rust-version")?.trim().strip_prefix('=')?;
        version(value.trim().trim_matches('"'))
    })
}

/// The Dockerfile's `ARG RUST_VERSION=…`, if a `FROM` uses it.
fn dockerfile_rust_version(dockerfile: &str) -> Option<Vec<u32>> {
    let used = dockerfile
        .lines()
        .any(|line| line.starts_with("FROM ") && line.contains("${RUST_VERSION}"));
    let value =
        dockerfile.lines().find_map(|line| line.trim().strip_prefix("ARG RUST_VERSION="))?;
    used.then(|| version(value.trim())).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags `text` uses, for shellkeep's subcommands `serve` and
    /// `doctor`, as `(line, subcommand, flag)`.
    fn flags(text: &str) -> Vec<(usize, String, String)> {
        let subcommands = ["serve", "doctor"].map(str::to_owned).into();
        flag_uses(text, &subcommands)
    }

    /// `(line, subcommand, flag)`s to compare with [`flags`]'.
    fn uses(expected: &[(usize, &str, &str)]) -> Vec<(usize, String, String)> {
        expected
            .iter()
            .map(|(line, sub, flag)| (*line, (*sub).to_owned(), (*flag).to_owned()))
            .collect()
    }

    #[test]
    fn an_entrypoint_array_gives_its_flags_after_the_subcommand() {
        let dockerfile = "FROM x\n\
                          RUN cargo build --release --locked -p shellkeep\n\
                          ENTRYPOINT [\"shellkeep\", \"serve\", \"--http\", \"0.0.0.0:1\", \"--allow-remote\"]\n";
        assert_eq!(
            flags(dockerfile),
            uses(&[(3, "serve", "--http"), (3, "serve", "--allow-remote")])
        );
    }

    #[test]
    fn a_comment_command_line_gives_its_flags_and_other_programs_none() {
        let text = "#   SHELLKEEP_TOKEN=x shellkeep serve --http 127.0.0.1:8765 --allowed-host=a.b\n\
                    #   docker run --init -p 1:1 shellkeep\n\
                    # Caddy sets no timeout (see `caddy run --watch`).\n";
        assert_eq!(flags(text), uses(&[(1, "serve", "--http"), (1, "serve", "--allowed-host")]));
    }

    #[test]
    fn prose_that_starts_with_the_name_is_no_command_line() {
        let text = "# shellkeep is PID 1 (no tini, no `docker run --init`), see `--grace`\n\
                    # install -d -o shellkeep -g shellkeep --mode 0755 /workspace\n";
        assert_eq!(flags(text), uses(&[(1, "serve", "--grace")]));
    }

    #[test]
    fn another_subcommand_is_named_as_such() {
        assert_eq!(flags("$ shellkeep doctor --json\n"), uses(&[(1, "doctor", "--json")]));
    }

    #[test]
    fn kubernetes_args_are_flags_of_serve_until_the_list_ends() {
        let yaml = "      containers:\n\
                    \x20       - name: shellkeep\n\
                    \x20         args:\n\
                    \x20           # The public name.\n\
                    \x20           - --allowed-host\n\
                    \x20           - shellkeep-ws1\n\
                    \x20           - \"--token-file=/run/t\"\n\
                    \x20         env:\n\
                    \x20           - name: X\n\
                    \x20             value: --not-a-flag-of-ours\n";
        assert_eq!(
            flags(yaml),
            uses(&[(5, "serve", "--allowed-host"), (7, "serve", "--token-file")])
        );
    }

    #[test]
    fn kubernetes_args_at_the_key_indentation_are_read_too() {
        let yaml = "args:\n- --sandbox\n- workspace-write\nenv: []\n- --later\n";
        assert_eq!(flags(yaml), uses(&[(2, "serve", "--sandbox")]));
    }

    #[test]
    fn prose_flags_count_in_backticks_only_when_the_span_starts_with_them() {
        let text = "# a token file (`--token-file FILE`) or `--allowed-origin`;\n\
                    # no init (`docker run --init`), after --grace unquoted.\n";
        assert_eq!(
            flags(text),
            uses(&[(1, "serve", "--token-file"), (1, "serve", "--allowed-origin")])
        );
    }

    #[test]
    fn help_subcommands_are_the_commands_section_only() {
        let help = "An MCP server\n\n\
                    Usage: shellkeep [OPTIONS] [COMMAND]\n\n\
                    Commands:\n\
                    \x20 serve   Serve MCP on stdin/stdout (the default)\n\
                    \x20 doctor  Print what protects this host's sessions\n\
                    \x20 help    Print this message\n\n\
                    Options:\n\
                    \x20     --policy <POLICY>  The file\n";
        assert_eq!(
            help_subcommands(help).into_iter().collect::<Vec<_>>(),
            ["doctor", "help", "serve"]
        );
        assert!(help_subcommands("Options:\n  --x\n").is_empty());
    }

    #[test]
    fn help_flags_are_the_option_lines_only() {
        let help = "Serve MCP\n\n\
                    Usage: shellkeep serve [OPTIONS]\n\n\
                    Options:\n\
                    \x20     --policy <POLICY>  The file (see --sandbox-best-effort)\n\
                    \x20     --http=<ADDR>      Where\n\
                    \x20 -h, --help             Print help\n\
                    \x20 -V                     Print version\n";
        assert_eq!(
            help_flags(help).into_iter().collect::<Vec<_>>(),
            ["--help", "--http", "--policy"]
        );
    }

    #[test]
    fn versions_come_from_the_manifest_and_the_builder_stage() {
        let manifest = "[workspace.package]\nedition = \"2024\"\nrust-version = \"1.88\"\n";
        assert_eq!(manifest_rust_version(manifest), Some(vec![1, 88]));
        let dockerfile = "ARG RUST_VERSION=1.95\nFROM rust:${RUST_VERSION}-slim AS build\n";
        assert_eq!(dockerfile_rust_version(dockerfile), Some(vec![1, 95]));
        assert!(dockerfile_rust_version(dockerfile).unwrap() >= vec![1, 88]);
        assert!(vec![1, 87, 9] < vec![1, 88]);
        // An argument no stage uses says nothing of the image.
        assert_eq!(dockerfile_rust_version("ARG RUST_VERSION=1.95\nFROM rust:1.80\n"), None);
    }
}
