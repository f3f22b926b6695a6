//! Docs: every relative link in README.md, ARCHITECTURE.md and `docs/*.md`
//! resolves, as GitHub resolves it: the file or directory it names exists
//! in the repository, and an anchor (`#…`) into a Markdown page matches the
//! GitHub slug of one of that page's headings. Links to other sites are not
//! followed.
//!
//! The Markdown reading is as much of CommonMark as these pages use: fenced
//! code blocks (```` ``` ```` and `~~~`) and code spans (which may cross a
//! line, not a blank line) hold no links and no headings; links are inline
//! (`[text](target "title")`, images too) or reference definitions
//! (`[label]: target`); headings are ATX (`## Title`). Indented code blocks
//! and setext headings (a line underlined with `===`) are not recognised:
//! write code in fences and headings with `#`. The slug follows
//! `github-slugger`: the heading's text (code spans kept, link targets,
//! HTML tags and emphasis marks dropped), lowercased, every character but
//! letters, digits, `_`, `-` and spaces removed, spaces turned into `-`;
//! the second heading with the same slug gets `-1`, the third `-2`.
//!
//! The checks are plain functions; the tests at the bottom feed them small
//! pages that must fail and must pass, so that a checker that finds nothing
//! cannot pass unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = workspace();
    let pages = pages(&root);
    assert!(
        pages.iter().any(|p| p == "README.md") && pages.iter().any(|p| p.starts_with("docs/")),
        "the docs check found no README.md or no docs/*.md: it reads the wrong tree ({pages:?})"
    );
    let problems = check(&root, &pages);
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the docs; fix the link, or the heading it points at \
         (an anchor is the heading's GitHub slug):\n{}",
        problems.len(),
        problems.iter().map(|p| format!("  {p}\n")).collect::<String>()
    );
}

// ---------------------------------------------------------------------------
// The check.

/// A link that does not resolve: where it is and what is wrong.
#[derive(Debug, PartialEq, Eq)]
struct Problem {
    /// The page, relative to the repository.
    page: String,
    /// The line of the page, from 1.
    line: usize,
    /// The link's target as written.
    target: String,
    /// What is wrong with it.
    what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: link `{}`: {}", self.page, self.line, self.target, self.what)
    }
}

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages checked, relative to `root`: README.md and ARCHITECTURE.md,
/// then every `.md` file directly in `docs/`, sorted.
fn pages(root: &Path) -> Vec<String> {
    let mut pages: Vec<String> = ["README.md", "ARCHITECTURE.md"]
        .into_iter()
        .filter(|name| root.join(name).is_file())
        .map(str::to_owned)
        .collect();
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Every relative link of `pages` (paths relative to `root`) that does not
/// resolve. Pages are read once each, links' target pages as needed.
fn check(root: &Path, pages: &[String]) -> Vec<Problem> {
    let mut anchors_of: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    let mut anchors_in = |page: &str| -> Option<BTreeSet<String>> {
        anchors_of
            .entry(page.to_owned())
            .or_insert_with(|| std::fs::read_to_string(root.join(page)).ok().map(|t| anchors(&t)))
            .clone()
    };
    let mut problems = Vec::new();
    for page in pages {
        let text = match std::fs::read_to_string(root.join(page)) {
            Ok(text) => text,
            Err(error) => {
                problems.push(Problem {
                    page: page.clone(),
                    line: 0,
                    target: String::new(),
                    what: format!("the page cannot be read: {error}"),
                });
                continue;
            }
        };
        for link in links(&text) {
            let problem = |what: String| Problem {
                page: page.clone(),
                line: link.line,
                target: link.target.clone(),
                what,
            };
            if is_external(&link.target) {
                continue;
            }
            let (path, fragment) = match link.target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (link.target.as_str(), None),
            };
            if path.is_empty() && fragment.is_none_or(str::is_empty) {
                problems.push(problem("the link has no target".to_owned()));
                continue;
            }
            let target = if path.is_empty() {
                page.clone()
            } else {
                match resolve(page, path) {
                    Some(target) => target,
                    None => {
                        problems.push(problem("it points outside the repository".to_owned()));
                        continue;
                    }
                }
            };
            let on_disk = root.join(&target);
            if !on_disk.exists() {
                problems.push(problem(format!("{target} does not exist")));
                continue;
            }
            let Some(fragment) = fragment.filter(|f| !f.is_empty()) else { continue };
            if !target.ends_with(".md") || on_disk.is_dir() {
                if !is_line_anchor(fragment) {
                    problems.push(problem(format!(
                        "{target} is not a Markdown page, so `#{fragment}` cannot be checked; \
                         link a heading of a page, or a line (`#L12`)"
                    )));
                }
                continue;
            }
            let Some(found) = anchors_in(&target) else {
                problems.push(problem(format!("{target} cannot be read")));
                continue;
            };
            if !found.contains(fragment) {
                problems.push(problem(format!(
                    "{target} has no heading whose anchor is `{fragment}` (its anchors: {})",
                    found.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    problems
}

/// Whether a target leaves the repository: a scheme (`https:`, `mailto:`)
/// or a protocol-relative `//host`.
fn is_external(target: &str) -> bool {
    if target.starts_with("//") {
        return true;
    }
    let Some(colon) = target.find(':') else { return false };
    let scheme = &target[..colon];
    !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// GitHub's anchor for a line of a file that is not rendered: `L12` or
/// `L12-L20`.
fn is_line_anchor(fragment: &str) -> bool {
    let number = |s: &str| {
        s.strip_prefix('L').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match fragment.split_once('-') {
        Some((from, to)) => number(from) && number(to),
        None => number(fragment),
    }
}

/// The repository path a link's `path` names from `page`: relative to the
/// page's directory, or to the repository's root when it starts with `/`;
/// `.` and `..` resolved. `None` when it climbs out of the repository.
fn resolve(page: &str, path: &str) -> Option<String> {
    let base = if path.starts_with('/') {
        PathBuf::new()
    } else {
        Path::new(page).parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut parts: Vec<String> = base
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part.to_owned()),
        }
    }
    Some(if parts.is_empty() { ".".to_owned() } else { parts.join("/") })
}

// ---------------------------------------------------------------------------
// Reading Markdown.

/// A link's target and the line it starts on (from 1).
#[derive(Debug, PartialEq, Eq)]
struct Link {
    /// The line of the page, from 1.
    line: usize,
    /// The target as written, without `<…>` or a title.
    target: String,
}

/// For each line of `text`, whether it belongs to a fenced code block
/// (its fences included). An unclosed fence runs to the end, as in
/// CommonMark.
fn fenced_lines(text: &str) -> Vec<bool> {
    let mut open: Option<(char, usize)> = None;
    text.split('\n')
        .map(|line| {
            let trimmed = line.trim_start();
            let fence = |c: char| trimmed.chars().take_while(|&x| x == c).count();
            match open {
                Some((c, length)) => {
                    let run = fence(c);
                    if run >= length && trimmed[run..].trim().is_empty() {
                        open = None;
                    }
                    true
                }
                None => {
                    for c in ['`', '~'] {
                        let run = fence(c);
                        // A backtick fence's info string has no backtick.
                        if run >= 3 && (c == '~' || !trimmed[run..].contains('`')) {
                            open = Some((c, run));
                            return true;
                        }
                    }
                    false
                }
            }
        })
        .collect()
}

/// `text` with fenced code blocks and code spans (their backticks too)
/// turned into spaces, byte for byte, so offsets and lines stay those of
/// `text`. A code span ends at the next run of as many backticks, not past
/// a blank line; a run that finds none is literal text.
fn without_code(text: &str) -> String {
    let fenced = fenced_lines(text);
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if fenced[i] {
            out.extend(std::iter::repeat_n(b' ', line.len()));
        } else {
            out.extend_from_slice(line.as_bytes());
        }
    }
    let bytes = out.clone();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'`' => {
                let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
                match closing_run(&bytes, at + run, run) {
                    Some(end) => {
                        for b in &mut out[at..end] {
                            if *b != b'\n' {
                                *b = b' ';
                            }
                        }
                        at = end;
                    }
                    None => at += run,
                }
            }
            _ => at += 1,
        }
    }
    // Only ASCII bytes (and whole lines of spaces) were replaced, so every
    // multi-byte character is intact.
    String::from_utf8(out).expect("only ASCII was replaced")
}

/// The end (exclusive) of the first run of exactly `length` backticks at or
/// after `from`, if it comes before a blank line.
fn closing_run(bytes: &[u8], from: usize, length: usize) -> Option<usize> {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'`' => {
                let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
                if run == length {
                    return Some(at + run);
                }
                at += run;
            }
            b'\n' => {
                let rest = &bytes[at + 1..];
                let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
                if line.iter().all(u8::is_ascii_whitespace) {
                    return None;
                }
                at += 1;
            }
            _ => at += 1,
        }
    }
    None
}

/// The line (from 1) of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Every link of `text` outside code: inline links and images
/// (`[text](target)`, `![alt](target)`) and reference definitions
/// (`[label]: target` at the start of a line), in order.
fn links(text: &str) -> Vec<Link> {
    let prose = without_code(text);
    let bytes = prose.as_bytes();
    let mut links = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'[' => {
                let Some(close) = matching_bracket(bytes, at) else {
                    at += 1;
                    continue;
                };
                let line_start = prose[..at].rfind('\n').map_or(0, |n| n + 1);
                let before = &prose[line_start..at];
                let definition = bytes.get(close + 1) == Some(&b':')
                    && before.len() <= 3
                    && before.bytes().all(|b| b == b' ');
                if bytes.get(close + 1) == Some(&b'(') {
                    if let Some(target) = destination(&prose[close + 2..]) {
                        links.push(Link { line: line_of(text, at), target });
                    }
                } else if definition {
                    let rest = prose[close + 2..].trim_start_matches([' ', '\t']);
                    if let Some(target) = destination(rest) {
                        links.push(Link { line: line_of(text, at), target });
                    }
                }
                // Go on inside the brackets: link text may hold an image.
                at += 1;
            }
            _ => at += 1,
        }
    }
    links
}

/// The `]` that closes the `[` at `open`, brackets nested and escapes
/// skipped, not past a blank line.
fn matching_bracket(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = open;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 1,
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            b'\n' if bytes.get(at + 1) == Some(&b'\n') => return None,
            _ => {}
        }
        at += 1;
    }
    None
}

/// A link destination at the start of `rest` (just after `(` or `]:`):
/// `<…>`, or everything up to a space or the `)` that balances the ones
/// inside. `None` when there is none (`[x]()` has an empty one, kept so that
/// it is reported).
fn destination(rest: &str) -> Option<String> {
    let rest = rest.trim_start_matches([' ', '\t']);
    if let Some(inner) = rest.strip_prefix('<') {
        return inner.find('>').map(|end| inner[..end].to_owned());
    }
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(rest[..i].to_owned()),
            ')' => depth -= 1,
            ' ' | '\t' | '\n' => return Some(rest[..i].to_owned()),
            _ => {}
        }
    }
    Some(rest.to_owned())
}

/// The text of every ATX heading of `text` outside fenced code, as written
/// (inline markup included), in order.
fn headings(text: &str) -> Vec<String> {
    let fenced = fenced_lines(text);
    text.split('\n')
        .enumerate()
        .filter(|(i, _)| !fenced[*i])
        .filter_map(|(_, line)| {
            let indent = line.len() - line.trim_start_matches(' ').len();
            let line = line.trim_start_matches(' ');
            let level = line.bytes().take_while(|&b| b == b'#').count();
            if indent > 3 || !(1..=6).contains(&level) {
                return None;
            }
            let rest = &line[level..];
            if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
                return None;
            }
            let mut title = rest.trim();
            // A closing sequence of `#`s, after a space, is not part of it.
            let without = title.trim_end_matches('#');
            if without.is_empty() || without.ends_with([' ', '\t']) {
                title = without.trim_end();
            }
            Some(title.to_owned())
        })
        .collect()
}

/// The anchors of a page's headings, as GitHub makes them: each heading's
/// slug, and `-1`, `-2`, … after a slug already taken.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for heading in headings(text) {
        let original = slug(&heading);
        let mut anchor = original.clone();
        while taken.contains_key(&anchor) {
            let count = taken.entry(original.clone()).or_insert(0);
            *count += 1;
            anchor = format!("{original}-{count}");
        }
        taken.insert(anchor.clone(), 0);
        anchors.insert(anchor);
    }
    anchors
}

/// GitHub's slug of a heading written as `heading` (inline Markdown): its
/// rendered text, lowercased, with letters, digits, `_`, `-` and spaces
/// kept, and each space made a `-`.
fn slug(heading: &str) -> String {
    heading_text(heading)
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The rendered text of inline Markdown, as far as slugs need it: code
/// spans' contents kept as they are; outside them, links and images reduced
/// to their text, HTML tags dropped, and `*` and `_` dropped where they
/// open or close emphasis (an `_` inside a word stays).
fn heading_text(markdown: &str) -> String {
    let mut text = String::new();
    let chars: Vec<char> = markdown.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        match c {
            '`' => {
                let run = chars[at..].iter().take_while(|&&x| x == '`').count();
                let after = at + run;
                let close = (after..chars.len()).find(|&i| {
                    chars[i..].iter().take_while(|&&x| x == '`').count() == run
                        && (i == 0 || chars[i - 1] != '`')
                });
                match close {
                    Some(end) => {
                        text.extend(&chars[after..end]);
                        at = end + run;
                    }
                    None => {
                        text.extend(&chars[at..after]);
                        at = after;
                    }
                }
            }
            '\\' if at + 1 < chars.len() => {
                text.push(chars[at + 1]);
                at += 2;
            }
            '!' if chars.get(at + 1) == Some(&'[') => at += 1,
            '[' | ']' => {
                // `](target)` ends a link: skip the target.
                if c == ']' && chars.get(at + 1) == Some(&'(') {
                    let mut depth = 0usize;
                    let mut end = at + 1;
                    while end < chars.len() {
                        match chars[end] {
                            '(' => depth += 1,
                            ')' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        end += 1;
                    }
                    at = end + 1;
                } else {
                    at += 1;
                }
            }
            '<' => match chars[at..].iter().position(|&x| x == '>') {
                Some(end) => at += end + 1,
                None => {
                    text.push(c);
                    at += 1;
                }
            },
            '*' => at += 1,
            '_' => {
                let before = at.checked_sub(1).map(|i| chars[i]);
                let run = chars[at..].iter().take_while(|&&x| x == '_').count();
                let after = chars.get(at + run).copied();
                let in_word = before.is_some_and(char::is_alphanumeric)
                    && after.is_some_and(char::is_alphanumeric);
                if in_word {
                    text.extend(&chars[at..at + run]);
                }
                at += run;
            }
            _ => {
                text.push(c);
                at += 1;
            }
        }
    }
    text.trim().to_owned()
}

// ---------------------------------------------------------------------------
// Tests of the checks themselves.

#[test]
fn slugs_are_githubs() {
    for (heading, expected) in [
        ("The tools", "the-tools"),
        ("`terminal`", "terminal"),
        ("`policy_explain`", "policy_explain"),
        ("`sessions` and `session_close`", "sessions-and-session_close"),
        (
            "How a command's end is known, and why it cannot be faked",
            "how-a-commands-end-is-known-and-why-it-cannot-be-faked",
        ),
        ("The policy in the terminal: unwatched time", "the-policy-in-the-terminal-unwatched-time"),
        ("MCP Inspector 2.x CLI", "mcp-inspector-2x-cli"),
        ("Claude Desktop, Cursor", "claude-desktop-cursor"),
        ("Full-screen programs", "full-screen-programs"),
        ("*Emphasis* and __strong__", "emphasis-and-strong"),
        ("snake_case stays", "snake_case-stays"),
        ("A [linked](other.md#x) word", "a-linked-word"),
        ("Café · menu", "café--menu"),
        ("What `C-c` does (and `C-\\`)", "what-c-c-does-and-c-"),
        ("Ends with hashes ##", "ends-with-hashes"),
    ] {
        let got = slug(&headings(&format!("## {heading}"))[0]);
        assert_eq!(got, expected, "the slug of {heading:?}");
    }
}

#[test]
fn a_repeated_heading_gets_a_numbered_anchor() {
    let page = "# Notes\n\n## Notes\n\n### Notes\n\n## Notes 1\n";
    let found: Vec<String> = anchors(page).into_iter().collect();
    assert_eq!(found, ["notes", "notes-1", "notes-1-1", "notes-2"]);
}

#[test]
fn headings_in_fences_and_code_are_not_headings() {
    let page = "# Real\n\n```sh\n# a comment\n```\n\n~~~\n## Not either\n~~~\n    # indented four\n#NoSpace\n";
    assert_eq!(headings(page), ["Real"]);
}

#[test]
fn links_are_found_outside_code_only() {
    let page = "\
A [page](docs/a.md) and an ![image](img/b.png \"title\").
`[not](a link)` and ``[nor](this) ` one`` either; \\[escaped](no.md).
A code span `that crosses
a line [inside](no.md)` is code.
[nested [brackets]](docs/c.md#part) and [paren](docs/d_(1).md) and [angle](<docs/e f.md>).
[outside](https://example.com) is found too, and checked by nobody.

```text
[fenced](no.md)
```
[label]: docs/ref.md
";
    let found: Vec<(usize, String)> = links(page).into_iter().map(|l| (l.line, l.target)).collect();
    let expected: Vec<(usize, String)> = [
        (1, "docs/a.md"),
        (1, "img/b.png"),
        (5, "docs/c.md#part"),
        (5, "docs/d_(1).md"),
        (5, "docs/e f.md"),
        (6, "https://example.com"),
        (11, "docs/ref.md"),
    ]
    .into_iter()
    .map(|(line, target)| (line, target.to_owned()))
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn targets_resolve_from_the_pages_directory() {
    assert_eq!(resolve("docs/a.md", "b.md").as_deref(), Some("docs/b.md"));
    assert_eq!(resolve("docs/a.md", "../README.md").as_deref(), Some("README.md"));
    assert_eq!(resolve("README.md", "./docs/").as_deref(), Some("docs"));
    assert_eq!(resolve("docs/a.md", "/LICENSE").as_deref(), Some("LICENSE"));
    assert_eq!(resolve("README.md", "../elsewhere.md"), None);
    assert!(is_external("https://example.com/a#b"));
    assert!(is_external("mailto:someone@example.com"));
    assert!(is_external("//example.com"));
    assert!(!is_external("docs/tools.md#x"));
    assert!(!is_external("#replies"));
    assert!(is_line_anchor("L12") && is_line_anchor("L3-L9"));
    assert!(!is_line_anchor("L") && !is_line_anchor("usage"));
}

/// A fresh directory for one test's pages, under Cargo's scratch directory
/// for integration tests.
fn scratch(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("docs-links").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a scratch directory");
        std::fs::write(path, text).expect("a scratch file");
    }
    dir
}

/// A README and two pages whose links all resolve.
const GOOD: &[(&str, &str)] = &[
    (
        "README.md",
        "# Title\n\nSee [tools](docs/tools.md), [a tool](docs/tools.md#the-run-tool), \
         [below](#usage), [the licence](LICENSE), [docs](docs/), [a line](src/x.rs#L3) \
         and [the web](https://example.com/#nothing).\n\n## Usage\n",
    ),
    (
        "docs/tools.md",
        "# Tools\n\n## The `run` tool\n\nBack to the [README](../README.md#title).\n",
    ),
    ("LICENSE", "MIT\n"),
    ("src/x.rs", "//! x\n"),
];

#[test]
fn links_that_resolve_pass() {
    let root = scratch("good", GOOD);
    let all = pages(&root);
    assert_eq!(all, ["README.md", "docs/tools.md"]);
    assert_eq!(check(&root, &all), []);
}

#[test]
fn a_missing_file_fails_naming_page_line_and_link() {
    let mut files = GOOD.to_vec();
    files[1] = ("docs/tools.md", "# Tools\n\n## The `run` tool\n\nSee\nthe [policy](policy.md).\n");
    let root = scratch("missing-file", &files);
    let problems = check(&root, &pages(&root));
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["docs/tools.md:6: link `policy.md`: docs/policy.md does not exist"]);
}

#[test]
fn a_missing_anchor_fails_naming_the_anchors_there() {
    let mut files = GOOD.to_vec();
    files[0] = ("README.md", "# Title\n\n[run](docs/tools.md#run) and [here](#titel).\n");
    let root = scratch("missing-anchor", &files);
    let shown: Vec<String> = check(&root, &pages(&root)).iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "README.md:3: link `docs/tools.md#run`: docs/tools.md has no heading whose anchor \
             is `run` (its anchors: the-run-tool, tools)",
            "README.md:3: link `#titel`: README.md has no heading whose anchor is `titel` \
             (its anchors: title)",
        ]
    );
}

#[test]
fn links_out_of_the_repository_or_into_code_by_name_fail() {
    let mut files = GOOD.to_vec();
    files[0] = (
        "README.md",
        "# Title\n\n[up](../outside.md), [empty](), [code](src/x.rs#main), [fine](src/x.rs).\n",
    );
    let root = scratch("odd", &files);
    let problems = check(&root, &pages(&root));
    let whats: Vec<(&str, &str)> =
        problems.iter().map(|p| (p.target.as_str(), p.what.as_str())).collect();
    assert_eq!(whats.len(), 3, "{problems:#?}");
    assert_eq!(whats[0], ("../outside.md", "it points outside the repository"));
    assert_eq!(whats[1], ("", "the link has no target"));
    assert_eq!(whats[2].0, "src/x.rs#main");
    assert!(whats[2].1.contains("is not a Markdown page"), "{}", whats[2].1);
}
