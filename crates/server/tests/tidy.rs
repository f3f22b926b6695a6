//! Tidy: invariants of the source tree that a machine checks, as ordinary
//! tests (like rust-analyzer's `tidy.rs`). Each `#[test]` at the top reads
//! the tree and names every file and line that breaks one rule, with what
//! to do about it:
//!
//! - every Rust file (`crates/*/src`, `crates/*/tests`, `crates/*/benches`,
//!   `fuzz/fuzz_targets`; test files too: each says what it tests) opens
//!   with a `//!` comment;
//! - `unsafe` (and `allow(unsafe_code)`) appears only in the files of
//!   [`UNSAFE_FILES`] (`crates/engine/src/process/spawn.rs`, and the PID
//!   namespace's set-up between fork and exec, `namespace.rs` beside it);
//! - every file of `crates/*/src` has a line in ARCHITECTURE.md's code map;
//! - no string literal of the engine's non-test code names a tool or a tool
//!   argument (the server chooses every word an agent reads);
//! - test code (`crates/*/tests`, `#[cfg(test)]` items) sleeps only inside
//!   the deadline helpers of [`SLEEP_HELPERS`], which poll a condition;
//! - the files of `crates/engine/src/session/` import each other without a
//!   cycle.
//!
//! The checks are plain functions of in-memory sources; the tests at the
//! bottom feed each one small inputs that must fail and must pass, so that a
//! checker that finds nothing cannot pass unnoticed. The lexer is Rust-aware
//! only as far as the checks need: comments, strings (raw, byte), character
//! literals and lifetimes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

/// The files allowed to contain `unsafe`: the child builders, and what a
/// child does between fork and exec to make its PID namespace. The first
/// is the one every tidy run must find.
const UNSAFE_FILES: &[&str] =
    &["crates/engine/src/process/spawn.rs", "crates/engine/src/process/namespace.rs"];

/// The file the tidy checks must find, or they read the wrong tree.
const UNSAFE_FILE: &str = UNSAFE_FILES[0];

/// Test helpers that may sleep, as (file, function): each polls a
/// condition until a deadline and fails (or gives up) when it passes.
const SLEEP_HELPERS: &[(&str, &str)] = &[
    ("crates/engine/tests/it/main.rs", "eventually"),
    ("crates/engine/tests/it/main.rs", "poll_until"),
    ("crates/engine/tests/it/terminal.rs", "wait_for_file"),
    ("crates/server/tests/it/main.rs", "wait_until"),
    ("crates/server/tests/it/main.rs", "poll_until"),
    ("crates/engine/src/guard.rs", "wait_until"),
    ("crates/engine/src/output/spill.rs", "wait_for_pruning"),
    ("crates/engine/src/output/one_way_in.rs", "wait_for_last_words"),
    // What the test servers' `Drop` calls: waits up to 10 s for the
    // server to exit, then kills it.
    ("crates/server/tests/it/main.rs", "exit_or_kill"),
    // The HTTP server's start: polls its log for the address it serves,
    // failing after a deadline.
    ("crates/server/tests/it/http.rs", "start"),
];

/// The MCP tools and their arguments, as the server names them.
const TOOLS: &[&str] =
    &["terminal", "run", "output", "sessions", "session_close", "policy_explain"];
const TOOL_ARGUMENTS: &[&str] = &[
    "command",
    "is_input",
    "timeout",
    "reset",
    "session",
    "cwd",
    "background",
    "record",
    "sandbox",
    "network",
    "offset",
    "limit",
    "timeout_sec",
    "no_output_timeout_sec",
    "env",
    "stdin",
    "keys",
];

/// Names that are no English word: an engine string with one of them, as a
/// word of its own, speaks the tool's language.
const TOOL_WORDS: &[&str] =
    &["is_input", "timeout_sec", "no_output_timeout_sec", "session_close", "policy_explain"];

/// The policy file's own keys, which the policy parser reads by name: a
/// string literal that is exactly one of them, in the parser, is the policy
/// format, not a tool argument.
const POLICY_FILE: &str = "crates/engine/src/policy.rs";
const POLICY_KEYS: &[&str] = &["exec_timeout_sec", "no_output_timeout_sec"];

// ---------------------------------------------------------------------------
// The checks run on the tree.

#[test]
fn every_file_opens_with_a_module_comment() {
    let violations = module_docs(&sources());
    report(
        "files without an opening `//!` comment",
        "start the file with a `//!` comment that says what it does and what it does not do \
         (STYLE.md, habit 2); for a test file, what it tests",
        &violations,
    );
}

#[test]
fn unsafe_is_only_in_its_files() {
    let sources = sources();
    // Not vacuous: the file allowed to have `unsafe` has it.
    let everywhere = unsafe_outside(&sources, &[]);
    for file in UNSAFE_FILES {
        assert!(
            everywhere.iter().any(|v| v.path == *file),
            "the check finds no `unsafe` even in {file}: it reads nothing"
        );
    }
    let violations = unsafe_outside(&sources, UNSAFE_FILES);
    report(
        "`unsafe` outside crates/engine/src/process/spawn.rs and namespace.rs",
        "move the unsafe call into crates/engine/src/process/spawn.rs behind a safe function \
         (with a `// SAFETY:` comment) and call that",
        &violations,
    );
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let root = workspace();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let violations = code_map(&sources(), &architecture);
    report(
        "source files missing from ARCHITECTURE.md's code map",
        "add a line for the file to ARCHITECTURE.md's `## Code map` (its full path, or its \
         file name in the nested list under its directory) that says what it holds",
        &violations,
    );
}

#[test]
fn engine_strings_do_not_name_tools_or_arguments() {
    let violations = engine_strings(&sources());
    report(
        "engine string literals that name an MCP tool or tool argument",
        "the engine returns typed values and errors; choose the words in the server (which \
         knows the tools' names) and keep the engine's strings free of them",
        &violations,
    );
}

#[test]
fn tests_sleep_only_in_deadline_helpers() {
    let violations = test_sleeps(&sources(), SLEEP_HELPERS);
    report(
        "test code that sleeps outside a deadline helper",
        "wait for the condition with the crate's deadline helper (`eventually`, `wait_until`) \
         instead of sleeping; a pure timing rule belongs in a unit test with made-up instants",
        &violations,
    );
}

#[test]
fn session_has_no_import_cycle() {
    let violations = session_cycles(&sources());
    report(
        "import cycles between the files of crates/engine/src/session/",
        "break each cycle: move what both sides need down into the lower file (shared state \
         knows nothing of the driver), or pass it in as a value",
        &violations,
    );
}

/// The lexer the checks stand on reads every file of the tree as Rust
/// does: lines kept, and braces balanced once comments, strings and
/// character literals are blanked (a string it misread would swallow or
/// expose braces).
#[test]
fn the_lexer_reads_every_file_of_the_tree() {
    let mut violations = Vec::new();
    for source in sources() {
        let code = lex(&source.text).code;
        if code.lines().count() != source.text.lines().count() {
            violations.push(violation(&source.path, 1, "the lexer changed the line count"));
        }
        let opened = code.matches('{').count();
        let closed = code.matches('}').count();
        if opened != closed {
            violations.push(violation(
                &source.path,
                1,
                format!("{opened} `{{` and {closed} `}}` after lexing"),
            ));
        }
    }
    report(
        "files the tidy lexer misreads",
        "teach `lex` in crates/server/tests/tidy.rs the construct it misreads",
        &violations,
    );
}

// ---------------------------------------------------------------------------
// Reading the tree and reporting.

/// One Rust file: its path from the workspace root (with `/`) and its text.
#[derive(Debug, Clone)]
struct Source {
    path: String,
    text: String,
}

/// One broken rule, at a file and line (1-based).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    path: String,
    line: usize,
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.message)
    }
}

fn violation(path: &str, line: usize, message: impl Into<String>) -> Violation {
    Violation { path: path.to_owned(), line, message: message.into() }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Rust file the rules cover, sorted by path.
fn sources() -> Vec<Source> {
    let root = workspace();
    let mut dirs = vec![root.join("fuzz/fuzz_targets")];
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/").flatten() {
        for part in ["src", "tests", "benches"] {
            dirs.push(krate.path().join(part));
        }
    }
    let mut files = Vec::new();
    for dir in dirs {
        collect_rust_files(&dir, &mut files);
    }
    let mut sources: Vec<Source> = files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(&root).expect("under the workspace");
            Source {
                path: relative.to_string_lossy().replace('\\', "/"),
                text: std::fs::read_to_string(&file).expect("a readable source file"),
            }
        })
        .collect();
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    assert!(
        sources.iter().any(|s| s.path == UNSAFE_FILE),
        "the tidy checks found no {UNSAFE_FILE}: they read the wrong tree"
    );
    sources
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// Fails with every violation, one a line, under `title` and what to do.
fn report(title: &str, what_to_do: &str, violations: &[Violation]) {
    if violations.is_empty() {
        return;
    }
    let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
    panic!(
        "tidy: {} {title}:\n{}\n\nWhat to do: {what_to_do}.\n",
        violations.len(),
        lines.join("\n")
    );
}

// ---------------------------------------------------------------------------
// A lexer just good enough for the checks.

/// A file with its comments blanked out and its string and character
/// literals' contents blanked (lines and columns kept), and the literals.
struct Lexed {
    code: String,
    strings: Vec<Literal>,
}

/// A string literal's contents (as written, escapes not undone) and the
/// line it starts on.
#[derive(Debug)]
struct Literal {
    line: usize,
    text: String,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut strings = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Copies `c` into the code as a space (newlines kept).
    let blank = |c: char, code: &mut String, line: &mut usize| {
        if c == '\n' {
            *line += 1;
            code.push('\n');
        } else {
            code.push(' ');
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                code.push(' ');
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    code.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    code.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(chars[i], &mut code, &mut line);
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"…", r#"…"#, br"…", cr#"…"#.
        let raw_start = if !prev_ident && c == 'r' {
            Some(i + 1)
        } else if !prev_ident && (c == 'b' || c == 'c') && next == Some('r') {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_start {
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                code.extend(&chars[i..=j]);
                let start_line = line;
                let mut text = String::new();
                let mut k = j + 1;
                while let Some(&ch) = chars.get(k) {
                    if ch == '"' && (0..hashes).all(|h| chars.get(k + 1 + h) == Some(&'#')) {
                        code.push('"');
                        code.extend(std::iter::repeat_n('#', hashes));
                        k += 1 + hashes;
                        break;
                    }
                    text.push(ch);
                    blank(ch, &mut code, &mut line);
                    k += 1;
                }
                strings.push(Literal { line: start_line, text });
                i = k;
                continue;
            }
        }
        // Strings: "…", b"…", c"….
        let quote = if c == '"' {
            Some(i)
        } else if !prev_ident && (c == 'b' || c == 'c') && next == Some('"') {
            code.push(c);
            Some(i + 1)
        } else {
            None
        };
        if let Some(q) = quote {
            code.push('"');
            let start_line = line;
            let mut text = String::new();
            let mut k = q + 1;
            while let Some(&ch) = chars.get(k) {
                if ch == '\\' {
                    text.push(ch);
                    blank(ch, &mut code, &mut line);
                    if let Some(&escaped) = chars.get(k + 1) {
                        text.push(escaped);
                        blank(escaped, &mut code, &mut line);
                    }
                    k += 2;
                    continue;
                }
                if ch == '"' {
                    code.push('"');
                    k += 1;
                    break;
                }
                text.push(ch);
                blank(ch, &mut code, &mut line);
                k += 1;
            }
            strings.push(Literal { line: start_line, text });
            i = k;
            continue;
        }
        // Character literals ('x', '\n', '\u{1F600}', b'x'); a lifetime
        // ('a) is code.
        if c == '\'' {
            let end = if next == Some('\\') {
                (i + 3..chars.len()).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                code.push('\'');
                for &ch in &chars[i + 1..end] {
                    blank(ch, &mut code, &mut line);
                }
                code.push('\'');
                i = end + 1;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        code.push(c);
        i += 1;
    }
    Lexed { code, strings }
}

/// The 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Byte offsets where `word` occurs in `code` as an identifier of its own.
fn word_offsets<'a>(code: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    code.match_indices(word).map(|(at, _)| at).filter(move |&at| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The offset of the `}` that closes the `{` at `open` (lexed code).
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (at, b) in code.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

/// The line ranges of the items marked `#[cfg(test)]` (lexed code).
fn test_regions(code: &str) -> Vec<(usize, usize)> {
    let mut regions = Vec::new();
    for (at, attribute) in code.match_indices("#[cfg(test)]") {
        let after = at + attribute.len();
        let rest = &code[after..];
        let end = match (rest.find('{'), rest.find(';')) {
            (Some(open), Some(semi)) if semi < open => after + semi,
            (_, Some(semi)) if rest.find('{').is_none() => after + semi,
            (Some(open), _) => matching_brace(code, after + open).unwrap_or(code.len() - 1),
            (None, _) => code.len() - 1,
        };
        regions.push((line_of(code, at), line_of(code, end)));
    }
    regions
}

fn in_regions(regions: &[(usize, usize)], line: usize) -> bool {
    regions.iter().any(|&(start, end)| start <= line && line <= end)
}

/// Every function with a body: its name and line range (lexed code).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut found = Vec::new();
    for at in word_offsets(code, "fn") {
        let rest = &code[at + 2..];
        let name: String = rest.trim_start().chars().take_while(|&c| is_ident(c)).collect();
        if name.is_empty() {
            continue;
        }
        let Some(open) = rest.find(['{', ';']) else { continue };
        if rest.as_bytes()[open] != b'{' {
            continue;
        }
        if let Some(close) = matching_brace(code, at + 2 + open) {
            found.push((name, line_of(code, at), line_of(code, close)));
        }
    }
    found
}

/// The innermost function around `line`.
fn enclosing_function(functions: &[(String, usize, usize)], line: usize) -> Option<&str> {
    functions
        .iter()
        .filter(|(_, start, end)| *start <= line && line <= *end)
        .min_by_key(|(_, start, end)| end - start)
        .map(|(name, ..)| name.as_str())
}

/// One path brought in by a `use` declaration: its segments and the name it
/// is known by here.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UsePath {
    line: usize,
    segments: Vec<String>,
    name: String,
}

/// Every path of every `use` declaration (lexed code), trees flattened.
fn use_paths(code: &str) -> Vec<UsePath> {
    let mut paths = Vec::new();
    for at in word_offsets(code, "use") {
        let rest = &code[at + 3..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(end) = rest.find(';') else { continue };
        let tree = rest[..end].replace(" as ", "@");
        let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
        let line = line_of(code, at);
        for (segments, name) in flatten_use(&tree) {
            paths.push(UsePath { line, segments, name });
        }
    }
    paths
}

/// `a::{b, c::{d@e}}` → `a::b` (known as `b`), `a::c::d` (known as `e`).
fn flatten_use(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree = tree.trim_start_matches("::");
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once('@') {
            Some((path, alias)) => (path, Some(alias)),
            None => (tree, None),
        };
        let segments: Vec<String> =
            path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let Some(last) = segments.last().cloned() else { return Vec::new() };
        let (segments, name) = if last == "self" {
            let mut parent = segments.clone();
            parent.pop();
            let name = parent.last().cloned().unwrap_or_default();
            (parent, name)
        } else {
            (segments, last)
        };
        return vec![(segments, alias.map_or(name, str::to_owned))];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| {
            let joined =
                if prefix.is_empty() { part.to_owned() } else { format!("{prefix}::{part}") };
            flatten_use(&joined)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The checks.

/// Files whose first non-blank line is not a `//!` comment.
fn module_docs(sources: &[Source]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for source in sources {
        let first = source.text.lines().enumerate().find(|(_, line)| !line.trim().is_empty());
        match first {
            Some((_, line)) if line.starts_with("//!") => {}
            Some((index, _)) => violations.push(violation(
                &source.path,
                index + 1,
                "the file does not open with a `//!` comment",
            )),
            None => violations.push(violation(&source.path, 1, "the file is empty")),
        }
    }
    violations
}

/// `unsafe` in code (not comments or strings) and `allow(unsafe_code)`
/// anywhere but `allowed`.
fn unsafe_outside(sources: &[Source], allowed: &[&str]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for source in sources.iter().filter(|source| !allowed.contains(&source.path.as_str())) {
        let code = lex(&source.text).code;
        for at in word_offsets(&code, "unsafe") {
            violations.push(violation(&source.path, line_of(&code, at), "`unsafe` code"));
        }
        for at in word_offsets(&code, "unsafe_code") {
            violations.push(violation(
                &source.path,
                line_of(&code, at),
                "a lint setting for `unsafe_code` (the workspace denies it)",
            ));
        }
    }
    violations
}

/// The paths ARCHITECTURE.md's code map gives a line: a top-level bullet's
/// leading `path` (and `+ name` beside it, in the same directory), and a
/// nested bullet's leading `name` under a top-level directory (`…/`).
fn code_map_paths(architecture: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut in_map = false;
    let mut directory: Option<String> = None;
    for line in architecture.lines() {
        if line.starts_with("## ") {
            in_map = line.trim() == "## Code map";
            continue;
        }
        if !in_map {
            continue;
        }
        let nested = line.starts_with("  - ") || line.starts_with("    - ");
        let Some(item) = line.trim_start().strip_prefix("- ") else { continue };
        // The leading names: `a` or `a` + `b`, up to the colon.
        let mut names = Vec::new();
        let mut rest = item;
        while let Some(after) = rest.strip_prefix('`') {
            let Some(end) = after.find('`') else { break };
            names.push(&after[..end]);
            rest = after[end + 1..].trim_start();
            rest = rest.strip_prefix('+').map_or(rest, str::trim_start);
        }
        let Some(first) = names.first() else { continue };
        if nested {
            if let Some(dir) = &directory {
                for name in &names {
                    paths.insert(format!("{dir}{name}"));
                }
            }
            continue;
        }
        let dir = match first.rfind('/') {
            Some(slash) => &first[..=slash],
            None => "",
        };
        directory = first.ends_with('/').then(|| (*first).to_owned());
        paths.insert((*first).to_owned());
        for name in &names[1..] {
            paths.insert(format!("{dir}{name}"));
        }
    }
    paths
}

/// Files of `crates/*/src` that the code map does not name.
fn code_map(sources: &[Source], architecture: &str) -> Vec<Violation> {
    let mapped = code_map_paths(architecture);
    sources
        .iter()
        .filter(|source| is_crate_source(&source.path))
        .filter(|source| !mapped.contains(&source.path))
        .map(|source| violation(&source.path, 1, "not in ARCHITECTURE.md's code map"))
        .collect()
}

fn is_crate_source(path: &str) -> bool {
    let mut parts = path.split('/');
    parts.next() == Some("crates") && parts.next().is_some() && parts.next() == Some("src")
}

/// Engine string literals outside test code that name a tool or argument:
/// a tool word ([`TOOL_WORDS`]) as a word of its own, any tool or argument
/// name in backticks (`` `reset` ``), or an argument followed by `=`
/// (`reset=true`).
fn engine_strings(sources: &[Source]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for source in sources.iter().filter(|s| s.path.starts_with("crates/engine/src/")) {
        let lexed = lex(&source.text);
        let tests = test_regions(&lexed.code);
        for literal in &lexed.strings {
            if in_regions(&tests, literal.line) {
                continue;
            }
            if source.path == POLICY_FILE && POLICY_KEYS.contains(&literal.text.as_str()) {
                continue;
            }
            let mut named = BTreeSet::new();
            for word in TOOL_WORDS {
                if word_offsets(&literal.text, word).next().is_some() {
                    named.insert(format!("`{word}`"));
                }
            }
            for word in TOOLS.iter().chain(TOOL_ARGUMENTS) {
                if literal.text.contains(&format!("`{word}`")) {
                    named.insert(format!("`{word}` in backticks"));
                }
            }
            for word in TOOL_ARGUMENTS {
                let assigns = word_offsets(&literal.text, word)
                    .any(|at| literal.text[at + word.len()..].trim_start().starts_with('='));
                if assigns {
                    named.insert(format!("`{word}=`"));
                }
            }
            if !named.is_empty() {
                let named: Vec<String> = named.into_iter().collect();
                violations.push(violation(
                    &source.path,
                    literal.line,
                    format!("a string names {}", named.join(", ")),
                ));
            }
        }
    }
    violations
}

/// Calls of `std::thread::sleep`, `tokio::time::sleep` or `sleep_until` in
/// test code, outside the helpers allowed to sleep.
fn test_sleeps(sources: &[Source], helpers: &[(&str, &str)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for source in sources {
        let all_test = source.path.split('/').nth(2) == Some("tests");
        let in_crate = source.path.starts_with("crates/");
        if !in_crate {
            continue;
        }
        let code = lex(&source.text).code;
        let tests = if all_test { Vec::new() } else { test_regions(&code) };
        if !all_test && tests.is_empty() {
            continue;
        }
        // `sleep` alone is the sleeping function when the file imports it.
        let imported: BTreeSet<String> = use_paths(&code)
            .into_iter()
            .filter(|path| {
                let joined = path.segments.join("::");
                ["thread::sleep", "time::sleep", "time::sleep_until"]
                    .iter()
                    .any(|f| joined.ends_with(f))
            })
            .map(|path| path.name)
            .collect();
        let functions = functions(&code);
        for name in ["sleep", "sleep_until"] {
            for at in word_offsets(&code, name) {
                let after = code[at + name.len()..].trim_start();
                if !after.starts_with('(') {
                    continue;
                }
                let before = code[..at].trim_end();
                let sleeps = if let Some(path) = before.strip_suffix("::") {
                    path.ends_with("thread") || path.ends_with("time")
                } else {
                    !before.ends_with('.') && !before.ends_with("fn") && imported.contains(name)
                };
                if !sleeps {
                    continue;
                }
                let line = line_of(&code, at);
                if !all_test && !in_regions(&tests, line) {
                    continue;
                }
                let function = enclosing_function(&functions, line);
                let allowed = function.is_some_and(|function| {
                    helpers.iter().any(|&(file, helper)| file == source.path && helper == function)
                });
                if !allowed {
                    violations.push(violation(
                        &source.path,
                        line,
                        format!(
                            "`{name}` in {}",
                            function.map_or("test code".to_owned(), |f| format!("`fn {f}`"))
                        ),
                    ));
                }
            }
        }
    }
    violations
}

/// Import cycles between the files of `crates/engine/src/session/`: an edge
/// from file `a` to file `b` is a `super::b`, `crate::session::b` path in
/// `a` (in a `use` or inline), or one to a name `mod.rs` re-exports from
/// `b`. `mod.rs` is the directory's root, not a room: its own imports are
/// not edges. Test code is left out.
fn session_cycles(sources: &[Source]) -> Vec<Violation> {
    const DIR: &str = "crates/engine/src/session/";
    let files: BTreeMap<String, &Source> = sources
        .iter()
        .filter_map(|source| {
            let name = source.path.strip_prefix(DIR)?.strip_suffix(".rs")?;
            (!name.contains('/')).then(|| (name.to_owned(), source))
        })
        .collect();
    let rooms: BTreeSet<&str> =
        files.keys().map(String::as_str).filter(|name| *name != "mod").collect();
    // Names `mod.rs` brings in from a room (re-exports or its own uses).
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    if let Some(root) = files.get("mod") {
        for path in use_paths(&lex(&root.text).code) {
            let segments: Vec<&str> = path.segments.iter().map(String::as_str).collect();
            let segments = segments.strip_prefix(&["self"]).unwrap_or(&segments);
            if let [room, _, ..] = segments
                && rooms.contains(room)
            {
                reexports.insert(path.name.clone(), (*room).to_owned());
            }
        }
    }
    // Edges, each with the first line that makes it.
    let mut edges: BTreeMap<(String, String), usize> = BTreeMap::new();
    for &room in &rooms {
        let code = lex(&files[room].text).code;
        let tests = test_regions(&code);
        let mut targets: Vec<(usize, String)> = Vec::new();
        for path in use_paths(&code) {
            let segments: Vec<&str> = path.segments.iter().map(String::as_str).collect();
            let after = match segments.as_slice() {
                ["super", rest @ ..] => rest,
                ["crate", "session", rest @ ..] => rest,
                _ => continue,
            };
            if let Some(first) = after.first() {
                targets.push((path.line, (*first).to_owned()));
            }
        }
        for prefix in ["super::", "crate::session::"] {
            for (at, _) in code.match_indices(prefix) {
                if code[..at].chars().next_back().is_some_and(|c| is_ident(c) || c == ':') {
                    continue;
                }
                let name: String =
                    code[at + prefix.len()..].chars().take_while(|&c| is_ident(c)).collect();
                targets.push((line_of(&code, at), name));
            }
        }
        for (line, name) in targets {
            if in_regions(&tests, line) {
                continue;
            }
            let target = if rooms.contains(name.as_str()) {
                Some(name)
            } else {
                reexports.get(&name).cloned()
            };
            if let Some(target) = target.filter(|target| target != room) {
                let entry = edges.entry((room.to_owned(), target)).or_insert(line);
                *entry = (*entry).min(line);
            }
        }
    }
    let graph: BTreeMap<&str, Vec<&str>> = rooms
        .iter()
        .map(|&room| {
            let next =
                edges.keys().filter(|(from, _)| from == room).map(|(_, to)| to.as_str()).collect();
            (room, next)
        })
        .collect();
    let mut violations = Vec::new();
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let start = component[0];
        let cycle = shortest_cycle(&graph, start, &component);
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                let line = edges[&(pair[0].to_owned(), pair[1].to_owned())];
                format!("{}.rs:{line} uses {}", pair[0], pair[1])
            })
            .collect();
        let inside: Vec<String> = edges
            .iter()
            .filter(|((from, to), _)| {
                component.contains(&from.as_str()) && component.contains(&to.as_str())
            })
            .map(|((from, to), line)| format!("{from}.rs:{line} → {to}"))
            .collect();
        let mutual: Vec<String> = edges
            .keys()
            .filter(|(from, to)| from < to && edges.contains_key(&(to.clone(), from.clone())))
            .filter(|(from, _)| component.contains(&from.as_str()))
            .map(|(from, to)| format!("{from} ↔ {to}"))
            .collect();
        violations.push(violation(
            &format!("{DIR}{start}.rs"),
            edges[&(cycle[0].to_owned(), cycle[1].to_owned())],
            format!(
                "cycle {} ({}); files that import each other: {}; every edge among {{{}}}: {}",
                cycle.join(" → "),
                steps.join(", "),
                if mutual.is_empty() { "none".to_owned() } else { mutual.join(", ") },
                component.join(", "),
                inside.join(", ")
            ),
        ));
    }
    violations
}

/// The strongly connected components of `graph` (Tarjan), each sorted.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Tarjan<'a, 'g> {
        graph: &'g BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                component.sort_unstable();
                self.components.push(component);
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &node in graph.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan.components.sort();
    tarjan.components
}

/// A shortest path from `start` back to `start` inside `component`.
fn shortest_cycle<'a>(
    graph: &BTreeMap<&'a str, Vec<&'a str>>,
    start: &'a str,
    component: &[&'a str],
) -> Vec<&'a str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in graph.get(node).into_iter().flatten() {
            if !component.contains(&next) {
                continue;
            }
            if next == start {
                let mut path = vec![start, node];
                let mut at = node;
                while at != start {
                    at = came_from[at];
                    path.push(at);
                }
                path.reverse();
                // `path` is start … node start, reversed: put it in order.
                return path;
            }
            if !came_from.contains_key(next) && next != start {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    vec![start, start]
}

// ---------------------------------------------------------------------------
// The checkers themselves, on small inputs that must fail and must pass.

mod checkers {
    use super::*;

    fn source(path: &str, text: &str) -> Source {
        Source { path: path.to_owned(), text: text.to_owned() }
    }

    fn lines(violations: &[Violation]) -> Vec<(String, usize)> {
        violations.iter().map(|v| (v.path.clone(), v.line)).collect()
    }

    #[test]
    fn the_lexer_blanks_comments_and_strings_and_keeps_lines() {
        let text = "let a = \"x // y\"; // unsafe\nlet b = r#\"a \"quoted\" unsafe\"#;\n\
                    /* unsafe /* nested */ still */ let c = '\"'; fn f<'a>(x: &'a str) {}\n\
                    let d = b\"unsafe\"; let e = '\\'';\nunsafe {}";
        let lexed = lex(text);
        assert_eq!(lexed.code.lines().count(), text.lines().count());
        let found: Vec<usize> =
            word_offsets(&lexed.code, "unsafe").map(|at| line_of(&lexed.code, at)).collect();
        assert_eq!(found, vec![5], "{}", lexed.code);
        let strings: Vec<(usize, &str)> =
            lexed.strings.iter().map(|s| (s.line, s.text.as_str())).collect();
        assert_eq!(
            strings,
            vec![(1, "x // y"), (2, "a \"quoted\" unsafe"), (4, "unsafe")],
            "{}",
            lexed.code
        );
        assert!(lexed.code.contains("fn f<'a>(x: &'a str)"), "{}", lexed.code);
    }

    #[test]
    fn use_trees_are_flattened_with_their_names() {
        let code =
            "use super::{driver::{self, Shell}, state::State as S};\npub use std::thread::sleep;";
        let paths: Vec<(String, String, usize)> =
            use_paths(code).into_iter().map(|p| (p.segments.join("::"), p.name, p.line)).collect();
        assert_eq!(
            paths,
            vec![
                ("super::driver".into(), "driver".into(), 1),
                ("super::driver::Shell".into(), "Shell".into(), 1),
                ("super::state::State".into(), "S".into(), 1),
                ("std::thread::sleep".into(), "sleep".into(), 2),
            ]
        );
    }

    #[test]
    fn a_file_without_an_opening_module_comment_is_named() {
        let sources = [
            source("crates/a/src/good.rs", "\n//! Does a thing.\nfn f() {}\n"),
            source("crates/a/src/bad.rs", "\n// Not a module comment.\n//! Too late.\n"),
            source("crates/a/src/attribute.rs", "#![allow(unused)]\n//! After an attribute.\n"),
            source("crates/a/src/outer.rs", "/// An item's comment.\nfn f() {}\n"),
            source("crates/a/src/empty.rs", ""),
        ];
        assert_eq!(
            lines(&module_docs(&sources)),
            vec![
                ("crates/a/src/bad.rs".into(), 2),
                ("crates/a/src/attribute.rs".into(), 1),
                ("crates/a/src/outer.rs".into(), 1),
                ("crates/a/src/empty.rs".into(), 1),
            ]
        );
    }

    #[test]
    fn unsafe_is_found_in_code_only_and_only_outside_its_files() {
        let code = "//! M.\n// unsafe in a comment\nlet s = \"unsafe\";\nunsafe { f() }\n";
        let sources = [
            source("crates/a/src/other.rs", code),
            source("crates/a/src/lint.rs", "//! M.\n#![allow(unsafe_code)]\n"),
            source("crates/a/src/allowed.rs", code),
            source("crates/a/src/words.rs", "//! M.\nlet unsafely = not_unsafe;\n"),
        ];
        assert_eq!(
            lines(&unsafe_outside(&sources, &["crates/a/src/allowed.rs"])),
            vec![("crates/a/src/other.rs".into(), 4), ("crates/a/src/lint.rs".into(), 2)]
        );
        // Each file of the list is allowed, and only those.
        assert_eq!(
            lines(&unsafe_outside(&sources, &["crates/a/src/allowed.rs", "crates/a/src/other.rs"])),
            vec![("crates/a/src/lint.rs".into(), 2)]
        );
    }

    #[test]
    fn a_source_file_missing_from_the_code_map_is_named() {
        let architecture = "# A\n\n- `crates/x/src/not_in_map.rs`: outside the map.\n\n\
            ## Code map\n\n\
            - `crates/x/src/lib.rs`: the root.\n\
            - `crates/x/src/policy.rs` + `default.json`: policies.\n\
            - `crates/x/src/room/`: rooms:\n\
            \x20 - `mod.rs`: the root.\n\
            \x20 - `a.rs`: a room, unlike `b.rs`.\n\
            - `crates/x/src/after.rs`: after the\n  nested list.\n\n\
            ## Threat model\n\n- `crates/x/src/later.rs`: not the map.\n";
        let paths = code_map_paths(architecture);
        let expected: BTreeSet<String> = [
            "crates/x/src/lib.rs",
            "crates/x/src/policy.rs",
            "crates/x/src/default.json",
            "crates/x/src/room/",
            "crates/x/src/room/mod.rs",
            "crates/x/src/room/a.rs",
            "crates/x/src/after.rs",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(paths, expected);
        let sources: Vec<Source> = [
            "crates/x/src/lib.rs",
            "crates/x/src/room/a.rs",
            "crates/x/src/room/b.rs",
            "crates/x/src/not_in_map.rs",
            "crates/x/src/later.rs",
            "crates/x/tests/it/main.rs",
        ]
        .iter()
        .map(|path| source(path, "//! M.\n"))
        .collect();
        assert_eq!(
            lines(&code_map(&sources, architecture)),
            vec![
                ("crates/x/src/room/b.rs".into(), 1),
                ("crates/x/src/not_in_map.rs".into(), 1),
                ("crates/x/src/later.rs".into(), 1),
            ]
        );
    }

    #[test]
    fn engine_strings_naming_tool_arguments_are_named() {
        let engine = "//! M.\n\
            fn f(is_input: bool) -> &'static str {\n\
            \x20   if is_input { \"send it with is_input\" } else { \"the exec_timeout_sec key\" }\n\
            }\n\
            const A: &str = \"call `session_close` or `reset`\";\n\
            const B: &str = \"use reset=true to restart\";\n\
            const C: &str = \"a reset of the terminal; a command ran\";\n\
            #[cfg(test)]\n\
            mod tests {\n\
            \x20   const T: &str = \"is_input\";\n\
            }\n";
        let policy = "//! M.\nfn p() { seconds(e, \"no_output_timeout_sec\"); }\n\
            const M: &str = \"set no_output_timeout_sec\";\n";
        let sources = [
            source("crates/engine/src/thing.rs", engine),
            source(POLICY_FILE, policy),
            source("crates/engine/src/other.rs", policy),
            source("crates/server/src/tools.rs", engine),
        ];
        let found = engine_strings(&sources);
        assert_eq!(
            lines(&found),
            vec![
                ("crates/engine/src/thing.rs".into(), 3),
                ("crates/engine/src/thing.rs".into(), 5),
                ("crates/engine/src/thing.rs".into(), 6),
                (POLICY_FILE.into(), 3),
                ("crates/engine/src/other.rs".into(), 2),
                ("crates/engine/src/other.rs".into(), 3),
            ],
            "{found:#?}"
        );
        assert!(found[1].message.contains("`session_close`"), "{}", found[1].message);
        assert!(found[1].message.contains("`reset` in backticks"), "{}", found[1].message);
        assert!(found[2].message.contains("`reset=`"), "{}", found[2].message);
    }

    #[test]
    fn sleeps_in_tests_outside_deadline_helpers_are_named() {
        let helper = "//! M.\n\
            pub async fn eventually(mut f: impl FnMut() -> bool) {\n\
            \x20   while !f() { tokio::time::sleep(D).await; }\n\
            }\n\
            async fn t() {\n\
            \x20   tokio::time::sleep(D).await;\n\
            \x20   let _ = \"std::thread::sleep(D)\"; // thread::sleep(D)\n\
            }\n";
        let bare = "//! M.\nuse std::thread::sleep;\nfn t() {\n    sleep(D);\n}\n";
        let helper_named_sleep = "//! M.\nfn sleep(secs: u32) -> String { x }\n\
            fn t() { let a = sleep(3); }\n";
        let unit = "//! M.\nfn code() { std::thread::sleep(D); }\n\
            #[cfg(test)]\nmod tests {\n    fn t() { std::thread::sleep(D); }\n\
            \x20   fn wait_until() { std::thread::sleep(D); }\n}\n";
        let sources = [
            source("crates/e/tests/it/main.rs", helper),
            source("crates/e/tests/it/other.rs", helper),
            source("crates/e/tests/it/bare.rs", bare),
            source("crates/e/tests/it/names.rs", helper_named_sleep),
            source("crates/e/src/unit.rs", unit),
            source("crates/e/benches/bench.rs", bare),
        ];
        let helpers =
            [("crates/e/tests/it/main.rs", "eventually"), ("crates/e/src/unit.rs", "wait_until")];
        let found = test_sleeps(&sources, &helpers);
        assert_eq!(
            lines(&found),
            vec![
                ("crates/e/tests/it/main.rs".into(), 6),
                ("crates/e/tests/it/other.rs".into(), 3),
                ("crates/e/tests/it/other.rs".into(), 6),
                ("crates/e/tests/it/bare.rs".into(), 4),
                ("crates/e/src/unit.rs".into(), 5),
            ],
            "{found:#?}"
        );
        assert!(found[1].message.contains("`fn eventually`"), "{}", found[1].message);
    }

    #[test]
    fn an_import_cycle_in_session_is_named_with_its_edges() {
        let dir = "crates/engine/src/session/";
        let files = [
            ("mod", "//! M.\nmod a;\nmod b;\nmod c;\nmod d;\npub use self::c::Thing;\nuse a::A;\n"),
            ("a", "//! A.\nuse super::b::B;\n// super::d::D is a comment\n"),
            ("b", "//! B.\nuse super::{Thing, Reply};\n"),
            (
                "c",
                "//! C.\nfn f() { super::a::A::new(); }\n#[cfg(test)]\nmod t { use super::super::d; }\n",
            ),
            ("d", "//! D.\nuse crate::session::a;\n"),
        ];
        let sources: Vec<Source> =
            files.iter().map(|(name, text)| source(&format!("{dir}{name}.rs"), text)).collect();
        let found = session_cycles(&sources);
        assert_eq!(lines(&found), vec![(format!("{dir}a.rs"), 2)], "{found:#?}");
        let message = &found[0].message;
        assert!(message.contains("cycle a → b → c → a"), "{message}");
        assert!(
            message.contains("b.rs:2 uses c") && message.contains("c.rs:2 uses a"),
            "{message}"
        );
        assert!(!message.contains("d.rs"), "d is outside the cycle: {message}");
        assert!(message.contains("import each other: none"), "{message}");
        // The same files without the edge back: no cycle.
        let acyclic: Vec<Source> = sources
            .iter()
            .map(
                |s| if s.path.ends_with("/c.rs") { source(&s.path, "//! C.\n") } else { s.clone() },
            )
            .collect();
        assert_eq!(session_cycles(&acyclic), Vec::new());
        // Two rooms that use each other inline.
        let pair = [
            source(&format!("{dir}x.rs"), "//! X.\nfn f() { crate::session::y::g() }\n"),
            source(&format!("{dir}y.rs"), "//! Y.\nfn g() { super::x::f() }\n"),
        ];
        let found = session_cycles(&pair);
        assert_eq!(lines(&found), vec![(format!("{dir}x.rs"), 2)]);
        assert!(found[0].message.contains("import each other: x ↔ y"), "{}", found[0].message);
    }

    #[test]
    fn a_report_names_every_violation_and_what_to_do() {
        let found = [violation("a.rs", 3, "broken"), violation("b.rs", 1, "also broken")];
        let panic = std::panic::catch_unwind(|| report("things", "fix them", &found))
            .expect_err("a report with violations fails");
        let text = panic.downcast_ref::<String>().expect("a message");
        assert!(text.contains("a.rs:3: broken\nb.rs:1: also broken"), "{text}");
        assert!(text.contains("What to do: fix them."), "{text}");
        report("nothing", "nothing", &[]);
    }
}
