//! Tidy: rules about the shape of the tree that the compiler and clippy do
//! not hold, as ordinary tests (like rust-analyzer's `tidy.rs`): module
//! headers, where `unsafe` lives and that each block says why it is sound,
//! the code map, the engine's words, sleeps in tests, the engine's front
//! door, import cycles and the function budget. Each `#[test]` at the top
//! fails naming every file and line that breaks its rule, and what to do.
//!
//! Not for behaviour (the other tests) or style (rustfmt, clippy). It reads
//! Rust with `syn` once per run, and with tokens where a rule must see
//! inside macro calls.
//!
//! Invariant: no checker can pass by finding nothing. Each is fed inputs
//! that must fail and must pass (`mod checkers`), each real-tree run fails
//! when it reads nothing, and every list of tolerated findings fails on an
//! entry that is no longer needed, so it only shrinks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::Visit;

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

/// The MCP tools, as the server names them.
const TOOLS: &[&str] =
    &["terminal", "run", "output", "sessions", "session_close", "policy_explain"];

/// The tools' arguments, as the server names them.
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

/// The policy parser, which reads the policy file's keys by name.
const POLICY_FILE: &str = "crates/engine/src/policy.rs";

/// The policy file's own keys: a string literal that is exactly one of
/// them, in the parser, is the policy format, not a tool argument.
const POLICY_KEYS: &[&str] = &["exec_timeout_sec", "no_output_timeout_sec"];

/// The engine's front door: the one file that names what the server may use.
const ENGINE_ROOT: &str = "crates/engine/src/lib.rs";

/// The lints the front door and the `unsafe` rule stand on, as a crate
/// attribute names them (`clippy::` for clippy's).
const REQUIRED_LINTS: &[&str] = &["unreachable_pub", "clippy::undocumented_unsafe_blocks"];

/// The longest a production function may be, from `fn` to its closing
/// brace.
const FUNCTION_BUDGET: usize = 80;

/// Production functions allowed over [`FUNCTION_BUDGET`], as (file,
/// function, why): only where the length is the clearest form.
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[(
    "crates/engine/src/screen.rs",
    "Renderer::csi_dispatch",
    "an emulator's dispatch table: one arm per control sequence, read as a table",
)];

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
    let tree = parsed_tree();
    // Not vacuous: the files allowed to have `unsafe` have it.
    let everywhere = unsafe_outside(tree, &[]);
    for file in UNSAFE_FILES {
        assert!(
            everywhere.iter().any(|v| v.path == *file),
            "the check finds no `unsafe` even in {file}: it reads nothing"
        );
    }
    report(
        "`unsafe` outside crates/engine/src/process/spawn.rs and namespace.rs",
        "move the unsafe call into crates/engine/src/process/spawn.rs behind a safe function \
         (with a `// SAFETY:` comment) and call that",
        &unsafe_outside(tree, UNSAFE_FILES),
    );
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let tree = parsed_tree();
    let blocks: usize = tree.iter().map(|file| file.unsafe_blocks.len()).sum();
    assert!(blocks > 0, "the check finds no `unsafe` block in the tree: it reads nothing");
    report(
        "`unsafe` blocks without a `// SAFETY:` comment",
        "put a `// SAFETY:` comment just before the statement that holds the block, saying \
         why each call is sound there",
        &safety_comments(tree),
    );
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let root = workspace();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    report(
        "source files missing from ARCHITECTURE.md's code map",
        "add a line for the file to ARCHITECTURE.md's `## Code map` (its full path, or its \
         file name in the nested list under its directory) that says what it holds",
        &code_map(&sources(), &architecture),
    );
}

#[test]
fn engine_strings_do_not_name_tools_or_arguments() {
    let tree = parsed_tree();
    let engine = tree.iter().filter(|file| file.path.starts_with("crates/engine/src/"));
    let strings: usize = engine.map(|file| string_literals(&file.tokens).len()).sum();
    assert!(strings > 100, "the check finds {strings} engine strings: it reads nothing");
    report(
        "engine string literals that name an MCP tool or tool argument",
        "the engine returns typed values and errors; choose the words in the server (which \
         knows the tools' names) and keep the engine's strings free of them",
        &engine_strings(tree),
    );
}

#[test]
fn tests_sleep_only_in_deadline_helpers() {
    let tree = parsed_tree();
    // Not vacuous, and no helper listed in vain: each helper sleeps.
    let everywhere = test_sleeps(tree, &[]);
    for (file, helper) in SLEEP_HELPERS {
        let place = format!("`fn {helper}`");
        assert!(
            everywhere.iter().any(|v| v.path == *file && v.message.ends_with(&place)),
            "SLEEP_HELPERS names {file} {place}, which does not sleep (or is gone): \
             remove it from the list"
        );
    }
    report(
        "test code that sleeps outside a deadline helper",
        "wait for the condition with the crate's deadline helper (`eventually`, `wait_until`) \
         instead of sleeping; a pure timing rule belongs in a unit test with made-up instants",
        &test_sleeps(tree, SLEEP_HELPERS),
    );
}

#[test]
fn the_engine_has_one_front_door() {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let tree = parsed_tree();
    let found = front_door(tree, &manifest);
    assert!(
        tree.iter().any(|file| file.path == ENGINE_ROOT),
        "the check finds no {ENGINE_ROOT}: it reads the wrong tree"
    );
    report(
        "breaches of the engine's front door",
        "keep every module of the engine private (`mod x;`) and name what the server uses \
         with `pub use` in crates/engine/src/lib.rs; turn the lints on in `Cargo.toml`'s \
         `[workspace.lints]`",
        &found,
    );
}

#[test]
fn no_import_cycle_between_modules_or_files() {
    let tree = parsed_tree();
    let graphs = import_graphs(tree);
    assert!(
        graphs.iter().any(|graph| graph.krate == "crates/engine/src/" && graph.edges.len() > 20),
        "the check finds almost no imports in the engine: it reads the wrong tree"
    );
    let found: Vec<Violation> = graphs.iter().flat_map(cycles).collect();
    report(
        "import cycles",
        "break each cycle: move what both sides need down into the lower module or file \
         (a leaf knows nothing of who uses it), or pass it in as a value",
        &found,
    );
}

#[test]
fn production_functions_fit_the_budget() {
    let tree = parsed_tree();
    let allowed: Vec<(&str, &str)> =
        LONG_FUNCTIONS.iter().map(|&(file, function, _)| (file, function)).collect();
    report(
        "production functions over the budget",
        "split the function into named steps (a small struct or enum instead of tuples of \
         flags); only a table read as a table belongs in `LONG_FUNCTIONS`, with its reason",
        &function_budget(tree, &allowed),
    );
}

#[test]
fn every_file_parses_as_rust() {
    let (_, failures) = read_tree();
    report(
        "files `syn` cannot parse",
        "the tidy test reads the tree with `syn`: update `syn` in \
         crates/server/Cargo.toml, or write the construct as `syn` reads it",
        failures,
    );
}

// ---------------------------------------------------------------------------
// Reading the tree and reporting.

/// One Rust file: its path from the workspace root (with `/`) and its text.
#[derive(Debug, Clone)]
struct Source {
    /// The path from the workspace root, with `/`.
    path: String,
    /// The file's text.
    text: String,
}

/// One broken rule, at a file and line (1-based).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    /// The file, from the workspace root.
    path: String,
    /// The line, from 1.
    line: usize,
    /// What is wrong, starting with a stable name of the thing.
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.message)
    }
}

/// A violation at `path`:`line`.
fn violation(path: &str, line: usize, message: impl Into<String>) -> Violation {
    Violation { path: path.to_owned(), line, message: message.into() }
}

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Rust file the rules cover (`crates/*/{src,tests,benches}`,
/// `fuzz/fuzz_targets`), sorted by path.
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

/// The `.rs` files under `dir`, recursively.
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

/// The tree read as Rust, once for every test: the files that parse, and
/// a violation for each that does not.
fn read_tree() -> &'static (Vec<Parsed>, Vec<Violation>) {
    static TREE: OnceLock<(Vec<Parsed>, Vec<Violation>)> = OnceLock::new();
    TREE.get_or_init(|| parse_all(&sources()))
}

/// The tree's parsed files; fails naming every file that does not parse.
fn parsed_tree() -> &'static [Parsed] {
    let (parsed, failures) = read_tree();
    report("files `syn` cannot parse", "see `every_file_parses_as_rust`", failures);
    parsed
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
// Reading a file as Rust, once: the facts the checks need, as plain data.

/// One Rust file read as Rust: what the checks need of its syntax, read
/// once (`syn`'s trees cannot be shared between the tests' threads).
struct Parsed {
    /// The path from the workspace root, with `/`.
    path: String,
    /// The file's text.
    text: String,
    /// Its tokens with groups opened and closed, comments gone and doc
    /// comments as `#[doc = "…"]`; the way into macro calls.
    tokens: Vec<Token>,
    /// Every line is test code: a file of `crates/*/tests`, or a module
    /// its parent declares under `#[cfg(test)]`.
    all_test: bool,
    /// The line ranges of `#[cfg(test)]` items, statements and expressions.
    test_regions: Vec<(usize, usize)>,
    /// Every function with a body, nested ones too.
    functions: Vec<Function>,
    /// Every path of every `use`, at any depth.
    uses: Vec<UseLeaf>,
    /// The modules the file declares at its top.
    modules: Vec<ModuleItem>,
    /// The paths of its top-level `use`s, and whether each is `pub`.
    top_uses: Vec<(UseLeaf, bool)>,
    /// Paths in code and macro calls that start with `crate`, `self` or
    /// `super`, with their lines (`use` and `pub(in …)` left out).
    inline_paths: Vec<(usize, Vec<String>)>,
    /// Its `unsafe` blocks.
    unsafe_blocks: Vec<UnsafeBlock>,
    /// The lints its inner attributes warn, deny or forbid
    /// (`unreachable_pub`, `clippy::undocumented_unsafe_blocks`).
    lints: Vec<String>,
}

/// A module a file declares at its top (`mod x;` or `mod x { … }`).
#[derive(Debug)]
struct ModuleItem {
    /// Its name.
    name: String,
    /// The line of `mod`.
    line: usize,
    /// Whether it is other than private (`pub`, `pub(crate)`, …).
    open: bool,
    /// Whether it is `#[cfg(test)]`.
    test: bool,
    /// Whether its body is in another file (`mod x;`).
    out_of_line: bool,
}

impl Parsed {
    /// Whether `line` is test code.
    fn is_test(&self, line: usize) -> bool {
        self.all_test || self.test_regions.iter().any(|&(start, end)| start <= line && line <= end)
    }

    /// Whether the file is part of a crate (`crates/<name>/src/…`).
    fn is_crate_source(&self) -> bool {
        is_crate_source(&self.path)
    }
}

/// One token: a leaf of the token tree, or where a group opens or closes.
#[derive(Debug, Clone)]
struct Token {
    /// The token.
    kind: TokenKind,
    /// Its line, from 1.
    line: usize,
}

/// What a [`Token`] is.
#[derive(Debug, Clone)]
enum TokenKind {
    /// An identifier or keyword.
    Ident(String),
    /// One punctuation character.
    Punct(char),
    /// A literal: a string's value (byte and C strings too), `None` for
    /// any other literal.
    Literal(Option<String>),
    /// A group opens.
    Open(Delimiter),
    /// A group closes.
    Close,
}

impl Token {
    /// Whether the token is the identifier `name`.
    fn is_ident(&self, name: &str) -> bool {
        matches!(&self.kind, TokenKind::Ident(ident) if ident == name)
    }

    /// Whether the token is the punctuation `c`.
    fn is_punct(&self, c: char) -> bool {
        matches!(self.kind, TokenKind::Punct(p) if p == c)
    }
}

/// Parses every source; returns the parsed files and a violation for each
/// file that does not parse.
fn parse_all(sources: &[Source]) -> (Vec<Parsed>, Vec<Violation>) {
    let mut parsed = Vec::new();
    let mut failures = Vec::new();
    for source in sources {
        match parse(source) {
            Ok(file) => parsed.push(file),
            Err(error) => failures.push(violation(
                &source.path,
                error.span().start().line,
                format!("`syn` cannot parse the file: {error}"),
            )),
        }
    }
    mark_test_modules(&mut parsed);
    (parsed, failures)
}

/// One source read as Rust; test modules declared by a parent are marked
/// by [`mark_test_modules`].
fn parse(source: &Source) -> syn::Result<Parsed> {
    let stream = TokenStream::from_str(&source.text)?;
    let syntax: syn::File = syn::parse2(stream.clone())?;
    let mut tokens = Vec::new();
    flatten(stream, &mut tokens);
    let mut regions = TestRegions::default();
    regions.visit_file(&syntax);
    let mut inline = InlinePaths::default();
    inline.visit_file(&syntax);
    Ok(Parsed {
        path: source.path.clone(),
        text: source.text.clone(),
        all_test: source.path.split('/').nth(2) == Some("tests"),
        test_regions: regions.0,
        functions: functions(&syntax),
        uses: use_items(&syntax).into_iter().flat_map(use_leaves).collect(),
        modules: module_items(&syntax),
        top_uses: top_uses(&syntax),
        inline_paths: inline.found.into_iter().chain(macro_paths(&syntax)).collect(),
        unsafe_blocks: unsafe_blocks(&syntax),
        lints: crate_lints(&syntax),
        tokens,
    })
}

/// The modules `file` declares at its top.
fn module_items(file: &syn::File) -> Vec<ModuleItem> {
    let modules = file.items.iter().filter_map(|item| match item {
        syn::Item::Mod(module) => Some(module),
        _ => None,
    });
    modules
        .map(|module| ModuleItem {
            name: module.ident.to_string(),
            line: module.mod_token.span.start().line,
            open: !matches!(module.vis, syn::Visibility::Inherited),
            test: is_cfg_test(&module.attrs),
            out_of_line: module.content.is_none(),
        })
        .collect()
}

/// The paths of `file`'s top-level `use`s, each with whether it is `pub`.
fn top_uses(file: &syn::File) -> Vec<(UseLeaf, bool)> {
    let uses = file.items.iter().filter_map(|item| match item {
        syn::Item::Use(item) => Some(item),
        _ => None,
    });
    uses.flat_map(|item| {
        let open = !matches!(item.vis, syn::Visibility::Inherited);
        use_leaves(item).into_iter().map(move |leaf| (leaf, open))
    })
    .collect()
}

/// The lints `file`'s inner attributes warn, deny or forbid.
fn crate_lints(file: &syn::File) -> Vec<String> {
    let mut lints = Vec::new();
    for attr in &file.attrs {
        let syn::Meta::List(list) = &attr.meta else { continue };
        if ["warn", "deny", "forbid"].iter().any(|level| list.path.is_ident(level)) {
            let names = list.tokens.to_string();
            lints.extend(names.split(',').map(|name| name.replace(' ', "")));
        }
    }
    lints
}

/// Appends the tokens of `stream`, groups opened and closed, to `tokens`.
fn flatten(stream: TokenStream, tokens: &mut Vec<Token>) {
    for tree in stream {
        let line = tree.span().start().line;
        match tree {
            TokenTree::Ident(ident) => {
                tokens.push(Token { kind: TokenKind::Ident(ident.to_string()), line });
            }
            TokenTree::Punct(punct) => {
                tokens.push(Token { kind: TokenKind::Punct(punct.as_char()), line });
            }
            TokenTree::Literal(literal) => {
                let value = match syn::Lit::new(literal) {
                    syn::Lit::Str(s) => Some(s.value()),
                    syn::Lit::ByteStr(s) => Some(String::from_utf8_lossy(&s.value()).into_owned()),
                    syn::Lit::CStr(s) => Some(s.value().to_string_lossy().into_owned()),
                    _ => None,
                };
                tokens.push(Token { kind: TokenKind::Literal(value), line });
            }
            TokenTree::Group(group) => {
                tokens.push(Token { kind: TokenKind::Open(group.delimiter()), line });
                flatten(group.stream(), tokens);
                let close = group.span_close().start().line;
                tokens.push(Token { kind: TokenKind::Close, line: close });
            }
        }
    }
}

/// Marks as all test the files a parent declares as `#[cfg(test)] mod x;`
/// (`x.rs` or `x/mod.rs` beside the parent's own modules), and every file
/// below them.
fn mark_test_modules(parsed: &mut [Parsed]) {
    let mut test_dirs = Vec::new();
    let mut test_files = BTreeSet::new();
    for file in parsed.iter().filter(|file| file.is_crate_source()) {
        let dir = children_dir(&file.path);
        for module in file.modules.iter().filter(|module| module.test && module.out_of_line) {
            test_files.insert(format!("{dir}{}.rs", module.name));
            test_dirs.push(format!("{dir}{}/", module.name));
        }
    }
    for file in parsed.iter_mut() {
        if test_files.contains(&file.path) || test_dirs.iter().any(|d| file.path.starts_with(d)) {
            file.all_test = true;
        }
    }
}

/// The directory of the modules `path` declares: its own for `lib.rs`,
/// `main.rs` and `mod.rs`, else one named after the file.
fn children_dir(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    match name {
        "lib.rs" | "main.rs" | "mod.rs" => format!("{dir}/"),
        _ => format!("{dir}/{}/", name.trim_end_matches(".rs")),
    }
}

/// Whether the attributes hold `#[cfg(test)]` (or `#[cfg(all(test, …))]`).
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let syn::Meta::List(list) = &attr.meta else { return false };
        if !list.path.is_ident("cfg") {
            return false;
        }
        let tokens: Vec<TokenTree> = list.tokens.clone().into_iter().collect();
        match tokens.as_slice() {
            [TokenTree::Ident(ident)] => ident == "test",
            [TokenTree::Ident(all), TokenTree::Group(group)] if all == "all" => group
                .stream()
                .into_iter()
                .any(|tree| matches!(&tree, TokenTree::Ident(ident) if ident == "test")),
            _ => false,
        }
    })
}

/// The 1-based lines a syntax node spans.
fn lines_of(node: &impl Spanned) -> (usize, usize) {
    let span = node.span();
    (span.start().line, span.end().line)
}

/// Collects the line ranges of the nodes marked `#[cfg(test)]`: items,
/// items of impls and traits, `let` statements, fields, variants, match
/// arms and the expressions that carry attributes in practice.
#[derive(Default)]
struct TestRegions(Vec<(usize, usize)>);

impl TestRegions {
    /// Records `node` when `attrs` mark it as test code; returns whether.
    fn mark(&mut self, attrs: &[syn::Attribute], node: &impl Spanned) -> bool {
        let test = is_cfg_test(attrs);
        if test {
            self.0.push(lines_of(node));
        }
        test
    }
}

impl<'ast> Visit<'ast> for TestRegions {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !self.mark(item_attrs(item), item) {
            syn::visit::visit_item(self, item);
        }
    }
    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(x) => &x.attrs,
            syn::ImplItem::Fn(x) => &x.attrs,
            syn::ImplItem::Type(x) => &x.attrs,
            syn::ImplItem::Macro(x) => &x.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !self.mark(attrs, item) {
            syn::visit::visit_impl_item(self, item);
        }
    }
    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs = match item {
            syn::TraitItem::Const(x) => &x.attrs,
            syn::TraitItem::Fn(x) => &x.attrs,
            syn::TraitItem::Type(x) => &x.attrs,
            syn::TraitItem::Macro(x) => &x.attrs,
            _ => return syn::visit::visit_trait_item(self, item),
        };
        if !self.mark(attrs, item) {
            syn::visit::visit_trait_item(self, item);
        }
    }
    fn visit_local(&mut self, local: &'ast syn::Local) {
        if !self.mark(&local.attrs, local) {
            syn::visit::visit_local(self, local);
        }
    }
    fn visit_stmt_macro(&mut self, mac: &'ast syn::StmtMacro) {
        if !self.mark(&mac.attrs, mac) {
            syn::visit::visit_stmt_macro(self, mac);
        }
    }
    fn visit_field(&mut self, field: &'ast syn::Field) {
        if !self.mark(&field.attrs, field) {
            syn::visit::visit_field(self, field);
        }
    }
    fn visit_variant(&mut self, variant: &'ast syn::Variant) {
        if !self.mark(&variant.attrs, variant) {
            syn::visit::visit_variant(self, variant);
        }
    }
    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        if !self.mark(&arm.attrs, arm) {
            syn::visit::visit_arm(self, arm);
        }
    }
    fn visit_expr(&mut self, expr: &'ast syn::Expr) {
        let attrs = match expr {
            syn::Expr::Block(x) => &x.attrs,
            syn::Expr::Call(x) => &x.attrs,
            syn::Expr::MethodCall(x) => &x.attrs,
            syn::Expr::Macro(x) => &x.attrs,
            syn::Expr::If(x) => &x.attrs,
            syn::Expr::Match(x) => &x.attrs,
            syn::Expr::Assign(x) => &x.attrs,
            syn::Expr::Unsafe(x) => &x.attrs,
            _ => return syn::visit::visit_expr(self, expr),
        };
        if !self.mark(attrs, expr) {
            syn::visit::visit_expr(self, expr);
        }
    }
}

/// An item's attributes.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(x) => &x.attrs,
        Item::Enum(x) => &x.attrs,
        Item::ExternCrate(x) => &x.attrs,
        Item::Fn(x) => &x.attrs,
        Item::ForeignMod(x) => &x.attrs,
        Item::Impl(x) => &x.attrs,
        Item::Macro(x) => &x.attrs,
        Item::Mod(x) => &x.attrs,
        Item::Static(x) => &x.attrs,
        Item::Struct(x) => &x.attrs,
        Item::Trait(x) => &x.attrs,
        Item::TraitAlias(x) => &x.attrs,
        Item::Type(x) => &x.attrs,
        Item::Union(x) => &x.attrs,
        Item::Use(x) => &x.attrs,
        _ => &[],
    }
}

/// One function with a body.
#[derive(Debug, Clone)]
struct Function {
    /// Its name, as `fn` names it.
    name: String,
    /// Its name with the type or trait whose impl holds it
    /// (`Shell::spawn`), or its name alone.
    qualified: String,
    /// The line of `fn`.
    start: usize,
    /// The line of its closing brace.
    end: usize,
}

impl Function {
    /// Its length in lines, from `fn` to the closing brace.
    fn length(&self) -> usize {
        self.end - self.start + 1
    }
}

/// Every function with a body in `file`, nested ones too.
fn functions(file: &syn::File) -> Vec<Function> {
    /// Collects the functions, knowing the impl or trait around them.
    #[derive(Default)]
    struct Functions {
        /// The type or trait of the impl being read, if any.
        owner: Option<String>,
        /// The functions found so far.
        found: Vec<Function>,
    }
    impl Functions {
        /// Records the function of `sig` with body `block`.
        fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
            let name = sig.ident.to_string();
            let qualified = match &self.owner {
                Some(owner) => format!("{owner}::{name}"),
                None => name.clone(),
            };
            let start = sig.fn_token.span.start().line;
            let end = block.brace_token.span.close().start().line;
            self.found.push(Function { name, qualified, start, end });
        }
    }
    impl<'ast> Visit<'ast> for Functions {
        fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
            let owner = self.owner.take();
            self.add(&item.sig, &item.block);
            syn::visit::visit_item_fn(self, item);
            self.owner = owner;
        }
        fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
            let owner = match &*item.self_ty {
                syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
                _ => None,
            };
            let outer = std::mem::replace(&mut self.owner, owner);
            syn::visit::visit_item_impl(self, item);
            self.owner = outer;
        }
        fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
            let outer = self.owner.replace(item.ident.to_string());
            syn::visit::visit_item_trait(self, item);
            self.owner = outer;
        }
        fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
            self.add(&item.sig, &item.block);
            let owner = self.owner.take();
            syn::visit::visit_impl_item_fn(self, item);
            self.owner = owner;
        }
        fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
            if let Some(block) = &item.default {
                self.add(&item.sig, block);
            }
            let owner = self.owner.take();
            syn::visit::visit_trait_item_fn(self, item);
            self.owner = owner;
        }
    }
    let mut functions = Functions::default();
    functions.visit_file(file);
    functions.found
}

/// The innermost function around `line`.
fn enclosing_function(functions: &[Function], line: usize) -> Option<&Function> {
    functions.iter().filter(|f| f.start <= line && line <= f.end).min_by_key(|f| f.end - f.start)
}

/// One path a `use` declaration brings in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UseLeaf {
    /// The line of its last name.
    line: usize,
    /// Its segments (`super`, `driver`, `Shell`), `self` taken off.
    segments: Vec<String>,
    /// The name it is known by here; `*` for a glob.
    name: String,
}

/// The paths of one `use` tree, flattened.
fn use_leaves(item: &syn::ItemUse) -> Vec<UseLeaf> {
    /// Walks the tree, `prefix` being the segments above `tree`.
    fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
        let mut leaf = |span: proc_macro2::Span, segments: Vec<String>, name: String| {
            out.push(UseLeaf { line: span.start().line, segments, name });
        };
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                walk(&path.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(name) if name.ident == "self" => {
                let known_as = prefix.last().cloned().unwrap_or_default();
                leaf(name.ident.span(), prefix.clone(), known_as);
            }
            syn::UseTree::Name(name) => {
                let mut segments = prefix.clone();
                segments.push(name.ident.to_string());
                leaf(name.ident.span(), segments, name.ident.to_string());
            }
            syn::UseTree::Rename(rename) => {
                let mut segments = prefix.clone();
                if rename.ident != "self" {
                    segments.push(rename.ident.to_string());
                }
                leaf(rename.ident.span(), segments, rename.rename.to_string());
            }
            syn::UseTree::Glob(glob) => leaf(glob.star_token.span, prefix.clone(), "*".to_owned()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    walk(tree, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&item.tree, &mut Vec::new(), &mut out);
    out
}

/// Every `use` declaration of the file, at any depth.
fn use_items(file: &syn::File) -> Vec<&syn::ItemUse> {
    /// Collects them.
    #[derive(Default)]
    struct Uses<'ast>(Vec<&'ast syn::ItemUse>);
    impl<'ast> Visit<'ast> for Uses<'ast> {
        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            self.0.push(item);
        }
    }
    let mut uses = Uses::default();
    uses.visit_file(file);
    uses.0
}

/// The string literals (also byte and C strings) of the file, macro
/// arguments included and doc comments left out, as (line, value).
fn string_literals(tokens: &[Token]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, token) in tokens.iter().enumerate() {
        let TokenKind::Literal(Some(value)) = &token.kind else { continue };
        let doc = at >= 2 && tokens[at - 1].is_punct('=') && tokens[at - 2].is_ident("doc");
        if !doc {
            found.push((token.line, value.clone()));
        }
    }
    found
}

/// Byte offsets where `word` occurs in `text` as a word of its own.
fn word_offsets<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).filter(move |&at| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

// ---------------------------------------------------------------------------
// The checks: module headers, `unsafe`, the code map, words, sleeps.

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

/// `unsafe` in code (macro arguments too; not comments or strings) and
/// lint settings for `unsafe_code`, anywhere but `allowed`.
fn unsafe_outside(tree: &[Parsed], allowed: &[&str]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in tree.iter().filter(|file| !allowed.contains(&file.path.as_str())) {
        for token in &file.tokens {
            if token.is_ident("unsafe") {
                violations.push(violation(&file.path, token.line, "`unsafe` code"));
            } else if token.is_ident("unsafe_code") {
                violations.push(violation(
                    &file.path,
                    token.line,
                    "a lint setting for `unsafe_code` (the workspace denies it)",
                ));
            }
        }
    }
    violations
}

/// One `unsafe` block: the line of `unsafe`, and the first line of the
/// statement (or item) that holds it, where its comment may stand.
#[derive(Debug)]
struct UnsafeBlock {
    /// The line of the `unsafe` keyword.
    line: usize,
    /// The first line of the innermost statement or item around it.
    statement: usize,
}

/// The `unsafe` blocks of a file.
fn unsafe_blocks(file: &syn::File) -> Vec<UnsafeBlock> {
    /// Collects them, knowing the statement around (its lines are worked
    /// out only for a statement that holds a block).
    #[derive(Default)]
    struct Blocks<'ast> {
        /// The statements around the node being read, innermost last.
        statements: Vec<&'ast syn::Stmt>,
        /// The blocks found so far.
        found: Vec<UnsafeBlock>,
    }
    impl<'ast> Visit<'ast> for Blocks<'ast> {
        fn visit_stmt(&mut self, stmt: &'ast syn::Stmt) {
            self.statements.push(stmt);
            syn::visit::visit_stmt(self, stmt);
            self.statements.pop();
        }
        fn visit_expr_unsafe(&mut self, block: &'ast syn::ExprUnsafe) {
            let line = block.unsafe_token.span.start().line;
            let statement = self.statements.last().map_or(line, |stmt| lines_of(*stmt).0);
            self.found.push(UnsafeBlock { line, statement });
            syn::visit::visit_expr_unsafe(self, block);
        }
    }
    let mut blocks = Blocks::default();
    blocks.visit_file(file);
    blocks.found
}

/// `unsafe` blocks with no `// SAFETY:` comment in the comment lines just
/// above the `unsafe` line or the line its statement starts on.
fn safety_comments(tree: &[Parsed]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in tree {
        let lines: Vec<&str> = file.text.lines().collect();
        // The comment lines just above `line` (1-based) say SAFETY.
        let said_above = |line: usize| {
            lines[..line.saturating_sub(1)]
                .iter()
                .rev()
                .map(|text| text.trim_start())
                .take_while(|text| text.starts_with("//") || text.starts_with("#["))
                .any(|text| text.starts_with("// SAFETY:"))
        };
        for block in &file.unsafe_blocks {
            if !said_above(block.line) && !said_above(block.statement) {
                violations.push(violation(
                    &file.path,
                    block.line,
                    "an `unsafe` block without a `// SAFETY:` comment",
                ));
            }
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

/// Whether `path` is a file of a crate's `src`.
fn is_crate_source(path: &str) -> bool {
    let mut parts = path.split('/');
    parts.next() == Some("crates") && parts.next().is_some() && parts.next() == Some("src")
}

/// Engine string literals outside test code that name a tool or argument:
/// a tool word ([`TOOL_WORDS`]) as a word of its own, any tool or argument
/// name in backticks (`` `reset` ``), or an argument followed by `=`
/// (`reset=true`).
fn engine_strings(tree: &[Parsed]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in tree.iter().filter(|file| file.path.starts_with("crates/engine/src/")) {
        for (line, text) in string_literals(&file.tokens) {
            if file.is_test(line) {
                continue;
            }
            if file.path == POLICY_FILE && POLICY_KEYS.contains(&text.as_str()) {
                continue;
            }
            let named = tool_names_in(&text);
            if !named.is_empty() {
                let named: Vec<String> = named.into_iter().collect();
                violations.push(violation(
                    &file.path,
                    line,
                    format!("a string names {}", named.join(", ")),
                ));
            }
        }
    }
    violations
}

/// How `text` names tools or arguments, each said once.
fn tool_names_in(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for word in TOOL_WORDS {
        if word_offsets(text, word).next().is_some() {
            named.insert(format!("`{word}`"));
        }
    }
    for word in TOOLS.iter().chain(TOOL_ARGUMENTS) {
        if text.contains(&format!("`{word}`")) {
            named.insert(format!("`{word}` in backticks"));
        }
    }
    for word in TOOL_ARGUMENTS {
        let assigns = word_offsets(text, word)
            .any(|at| text[at + word.len()..].trim_start().starts_with('='));
        if assigns {
            named.insert(format!("`{word}=`"));
        }
    }
    named
}

/// Calls of `std::thread::sleep`, `tokio::time::sleep` or `sleep_until`
/// (also inside macro calls, and by the name a `use` gives them) in test
/// code, outside the helpers allowed to sleep.
fn test_sleeps(tree: &[Parsed], helpers: &[(&str, &str)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in tree.iter().filter(|file| file.path.starts_with("crates/")) {
        if !file.all_test && file.test_regions.is_empty() {
            continue;
        }
        // `sleep` alone is the sleeping function when the file imports it.
        let imported: BTreeSet<String> = file
            .uses
            .iter()
            .filter(|leaf| {
                let joined = leaf.segments.join("::");
                ["thread::sleep", "time::sleep", "time::sleep_until"]
                    .iter()
                    .any(|f| joined.ends_with(f))
            })
            .map(|leaf| leaf.name.clone())
            .collect();
        let names: Vec<&str> = ["sleep", "sleep_until"]
            .into_iter()
            .chain(imported.iter().map(String::as_str))
            .collect();
        for (at, token) in file.tokens.iter().enumerate() {
            let Some(name) = names.iter().find(|n| token.is_ident(n)) else { continue };
            if !sleeps_at(&file.tokens, at, &imported) || !file.is_test(token.line) {
                continue;
            }
            let function = enclosing_function(&file.functions, token.line);
            let allowed = function.is_some_and(|function| {
                helpers.iter().any(|&(path, helper)| path == file.path && helper == function.name)
            });
            if !allowed {
                let place = function.map_or("test code".to_owned(), |f| format!("`fn {}`", f.name));
                violations.push(violation(&file.path, token.line, format!("`{name}` in {place}")));
            }
        }
    }
    violations
}

/// Whether the `sleep` identifier at `tokens[at]` is a call of a sleeping
/// function: `thread::sleep(` or `time::sleep(`, or an imported one
/// called by its name (not a method, not a definition).
fn sleeps_at(tokens: &[Token], at: usize, imported: &BTreeSet<String>) -> bool {
    let called = matches!(
        tokens.get(at + 1),
        Some(Token { kind: TokenKind::Open(Delimiter::Parenthesis), .. })
    );
    if !called {
        return false;
    }
    let before = |back: usize| at.checked_sub(back).map(|i| &tokens[i]);
    let after_path =
        before(1).is_some_and(|t| t.is_punct(':')) && before(2).is_some_and(|t| t.is_punct(':'));
    if after_path {
        return before(3).is_some_and(|t| t.is_ident("thread") || t.is_ident("time"));
    }
    let method_or_definition = before(1).is_some_and(|t| t.is_punct('.') || t.is_ident("fn"));
    let TokenKind::Ident(name) = &tokens[at].kind else { return false };
    !method_or_definition && imported.contains(name)
}

// ---------------------------------------------------------------------------
// The front door and the function budget.

/// Breaches of the engine's front door: a module of [`ENGINE_ROOT`] that is
/// not private, a glob `pub use`, a root that names nothing with `pub use`,
/// and a lint of [`REQUIRED_LINTS`] that is neither on in the workspace's
/// `[workspace.lints]` (`manifest`) nor in every crate root's attributes.
fn front_door(tree: &[Parsed], manifest: &str) -> Vec<Violation> {
    let mut violations = Vec::new();
    if let Some(root) = tree.iter().find(|file| file.path == ENGINE_ROOT) {
        violations.extend(open_modules(root));
    }
    let roots: Vec<&Parsed> = tree
        .iter()
        .filter(|file| {
            let parts: Vec<&str> = file.path.split('/').collect();
            matches!(parts.as_slice(), ["crates", _, "src", "lib.rs" | "main.rs"])
        })
        .collect();
    for lint in REQUIRED_LINTS {
        let in_manifest = manifest_lint_on(manifest, lint);
        let in_roots =
            !roots.is_empty() && roots.iter().all(|root| root.lints.iter().any(|l| l == lint));
        if !in_manifest && !in_roots {
            let table = lint_table(lint).0;
            let line = manifest.lines().position(|l| l.trim() == table);
            violations.push(violation(
                "Cargo.toml",
                line.map_or(1, |l| l + 1),
                format!("the lint `{lint}` is not on: set it to \"warn\" in `{table}`"),
            ));
        }
    }
    violations
}

/// The engine root's modules that are not private, its glob re-exports,
/// and the lack of any `pub use`.
fn open_modules(root: &Parsed) -> Vec<Violation> {
    let mut violations = Vec::new();
    for module in root.modules.iter().filter(|module| module.open) {
        violations.push(violation(
            &root.path,
            module.line,
            format!("`pub mod {}`: a module of the engine is open", module.name),
        ));
    }
    let named: Vec<&UseLeaf> =
        root.top_uses.iter().filter(|(_, open)| *open).map(|(leaf, _)| leaf).collect();
    for leaf in named.iter().filter(|leaf| leaf.name == "*") {
        violations.push(violation(
            &root.path,
            leaf.line,
            format!("`pub use {}::*`: a glob opens the whole module", leaf.segments.join("::")),
        ));
    }
    if named.is_empty() {
        violations.push(violation(
            &root.path,
            1,
            "no `pub use`: the front door names nothing the server may use",
        ));
    }
    violations
}

/// Whether the manifest's `[workspace.lints.rust]` (or `.clippy` for a
/// `clippy::` lint) sets `lint` to warn, deny or forbid.
fn manifest_lint_on(manifest: &str, lint: &str) -> bool {
    let (table, key) = lint_table(lint);
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == table;
            continue;
        }
        let Some((name, value)) = line.split_once('=') else { continue };
        if in_table && name.trim() == key {
            return ["\"warn\"", "\"deny\"", "\"forbid\""]
                .iter()
                .any(|level| value.contains(level));
        }
    }
    false
}

/// The `[workspace.lints]` table that sets `lint`, and its key there.
fn lint_table(lint: &str) -> (&'static str, &str) {
    match lint.strip_prefix("clippy::") {
        Some(key) => ("[workspace.lints.clippy]", key),
        None => ("[workspace.lints.rust]", lint),
    }
}

/// Production functions (non-test code of `crates/*/src`) longer than
/// [`FUNCTION_BUDGET`] lines and not in `allowed` (file, qualified name),
/// plus each entry of `allowed` that names no such function.
fn function_budget(tree: &[Parsed], allowed: &[(&str, &str)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut used = BTreeSet::new();
    for file in tree.iter().filter(|file| file.is_crate_source() && !file.all_test) {
        for function in &file.functions {
            if function.length() <= FUNCTION_BUDGET || file.is_test(function.start) {
                continue;
            }
            let key = (file.path.as_str(), function.qualified.as_str());
            if allowed.contains(&key) {
                used.insert((file.path.clone(), function.qualified.clone()));
                continue;
            }
            violations.push(violation(
                &file.path,
                function.start,
                format!(
                    "`fn {}` is {} lines long (the budget is {FUNCTION_BUDGET})",
                    function.qualified,
                    function.length()
                ),
            ));
        }
    }
    for &(path, function) in allowed {
        if !used.contains(&(path.to_owned(), function.to_owned())) {
            violations.push(violation(
                path,
                1,
                format!(
                    "`fn {function}` is allowed over the budget but is not over it (or gone): \
                     remove it from the list"
                ),
            ));
        }
    }
    violations
}

// ---------------------------------------------------------------------------
// Import cycles, between modules and between files.

/// The import graph of one crate, at file level.
#[derive(Debug, Default)]
struct ImportGraph {
    /// The crate's source directory (`crates/engine/src/`).
    krate: String,
    /// Its non-test files, by path relative to `krate`, with their module
    /// paths (`session/driver.rs` is `["session", "driver"]`).
    files: BTreeMap<String, Vec<String>>,
    /// Edges between files (relative paths), each with the first line
    /// (in the first file) that makes it.
    edges: BTreeMap<(String, String), usize>,
}

/// One import graph for each crate of the tree (`crates/*/src`).
///
/// An edge from file `a` to file `b` is a path in `a`'s non-test code (a
/// `use`, or an inline path in code or a macro call) that starts with
/// `crate::`, `super::` or `self::` (in a `use`, also a module `a`
/// declares) and names `b`'s module or an item in it. A name brought in
/// by a `use` of the module named (a re-export) leads on to where it came
/// from. A path into a file's own module or the modules below it is no
/// edge: a module composes its children.
fn import_graphs(tree: &[Parsed]) -> Vec<ImportGraph> {
    let mut graphs: BTreeMap<String, ImportGraph> = BTreeMap::new();
    for file in tree.iter().filter(|file| file.is_crate_source() && !file.all_test) {
        let (krate, relative) = split_crate(&file.path);
        let graph = graphs.entry(krate.clone()).or_default();
        graph.krate = krate;
        graph.files.insert(relative.clone(), module_path(&relative));
    }
    let modules: BTreeMap<String, Modules> = tree
        .iter()
        .filter(|file| file.is_crate_source() && !file.all_test)
        .map(|file| (file.path.clone(), Modules::of(file)))
        .collect();
    for graph in graphs.values_mut() {
        let by_module: BTreeMap<Vec<String>, String> =
            graph.files.iter().map(|(file, module)| (module.clone(), file.clone())).collect();
        let resolver = Resolver { krate: &graph.krate, by_module: &by_module, modules: &modules };
        let mut edges = BTreeMap::new();
        for (file, module) in &graph.files {
            let here = &modules[&format!("{}{file}", graph.krate)];
            for (line, path) in &here.references {
                let Some(target) = resolver.file_of(path) else { continue };
                let below = graph.files[&target].starts_with(module);
                if target != *file && !below {
                    let entry = edges.entry((file.clone(), target)).or_insert(*line);
                    *entry = (*entry).min(*line);
                }
            }
        }
        graph.edges = edges;
    }
    graphs.into_values().collect()
}

/// `crates/engine/src/session/a.rs` → (`crates/engine/src/`, `session/a.rs`).
fn split_crate(path: &str) -> (String, String) {
    let at = path.find("/src/").expect("a crate source") + "/src/".len();
    (path[..at].to_owned(), path[at..].to_owned())
}

/// The module path of a file, from its path relative to `src/`.
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative.split('/').map(str::to_owned).collect();
    let last = parts.pop().unwrap_or_default();
    match last.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" => {}
        _ => parts.push(last.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// What one file says about paths: where it points (absolute module paths,
/// from the crate root) and the names its `use`s bring in.
struct Modules {
    /// Absolute paths of its non-test references, with their lines.
    references: Vec<(usize, Vec<String>)>,
    /// The names its top-level `use`s bring in, to absolute paths (`None`
    /// for another crate's).
    aliases: BTreeMap<String, Option<Vec<String>>>,
}

impl Modules {
    /// Reads the references and aliases of `file`.
    fn of(file: &Parsed) -> Modules {
        let (_, relative) = split_crate(&file.path);
        let module = module_path(&relative);
        let declared: BTreeSet<String> =
            file.modules.iter().map(|module| module.name.clone()).collect();
        let mut aliases = BTreeMap::new();
        for (leaf, _) in file.top_uses.iter().filter(|(leaf, _)| leaf.name != "*") {
            aliases.insert(leaf.name.clone(), absolute(&module, &leaf.segments, Some(&declared)));
        }
        let mut references = Vec::new();
        for leaf in &file.uses {
            if let Some(path) = absolute(&module, &leaf.segments, Some(&declared)) {
                references.push((leaf.line, path));
            }
        }
        for (line, segments) in &file.inline_paths {
            if let Some(path) = absolute(&module, segments, None) {
                references.push((*line, path));
            }
        }
        references.retain(|(line, _)| !file.is_test(*line));
        Modules { references, aliases }
    }
}

/// A path made absolute from the crate root, seen from `module`: `crate::`,
/// `self::`, `super::` (repeated), or (in a `use`) a module the file
/// declares; `None` for any other crate's path.
fn absolute(
    module: &[String],
    segments: &[String],
    declared: Option<&BTreeSet<String>>,
) -> Option<Vec<String>> {
    let first = segments.first()?;
    let mut base: Vec<String> = module.to_vec();
    let mut rest = segments;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &segments[1..];
        }
        "self" => rest = &segments[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        name if declared.is_some_and(|declared| declared.contains(name)) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Finds the file an absolute path leads to, through re-exports.
struct Resolver<'a> {
    /// The crate's source directory.
    krate: &'a str,
    /// Files by module path, relative to the crate's source directory.
    by_module: &'a BTreeMap<Vec<String>, String>,
    /// What each file (full path) says about paths.
    modules: &'a BTreeMap<String, Modules>,
}

impl Resolver<'_> {
    /// The file (relative path) of the longest module prefix of `path`,
    /// following a name its module brings in with `use` to where it came
    /// from; `None` when it leads out of the crate.
    fn file_of(&self, path: &[String]) -> Option<String> {
        let mut path = path.to_vec();
        // A bound on re-exports of re-exports, against a loop of aliases.
        for _ in 0..8 {
            let (length, file) = (0..=path.len())
                .rev()
                .find_map(|n| self.by_module.get(&path[..n]).map(|file| (n, file)))?;
            let Some(next) = path.get(length) else { return Some(file.clone()) };
            let here = &self.modules[&format!("{}{file}", self.krate)];
            match here.aliases.get(next) {
                // Defined here (or brought in by a glob).
                None => return Some(file.clone()),
                // Another crate's name.
                Some(None) => return None,
                Some(Some(alias)) => {
                    path = alias.iter().chain(&path[length + 1..]).cloned().collect();
                }
            }
        }
        None
    }
}

/// The paths in code (not in `use`, not in a `pub(in …)`) that start with
/// `crate`, `self` or `super`, with their lines.
#[derive(Default)]
struct InlinePaths {
    /// The paths found so far, with their lines.
    found: Vec<(usize, Vec<String>)>,
}

impl<'ast> Visit<'ast> for InlinePaths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && ["crate", "self", "super"].contains(&segments[0].as_str()) {
            self.found.push((path.segments[0].ident.span().start().line, segments));
        }
        syn::visit::visit_path(self, path);
    }
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}
}

/// The `crate::…`, `self::…` and `super::…` paths inside macro calls.
fn macro_paths(file: &syn::File) -> Vec<(usize, Vec<String>)> {
    /// Collects the macro calls' tokens.
    #[derive(Default)]
    struct Macros(Vec<Token>);
    impl<'ast> Visit<'ast> for Macros {
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            flatten(mac.tokens.clone(), &mut self.0);
            self.0.push(Token { kind: TokenKind::Close, line: 0 });
        }
    }
    let mut macros = Macros::default();
    macros.visit_file(file);
    let tokens = macros.0;
    let mut found = Vec::new();
    for (at, token) in tokens.iter().enumerate() {
        let starts = ["crate", "self", "super"].iter().any(|word| token.is_ident(word));
        let continues_one = at >= 2 && tokens[at - 1].is_punct(':') && tokens[at - 2].is_punct(':');
        if !starts || continues_one {
            continue;
        }
        let mut segments = Vec::new();
        let mut next = at;
        while let Some(Token { kind: TokenKind::Ident(name), .. }) = tokens.get(next) {
            segments.push(name.clone());
            let separated = tokens.get(next + 1).is_some_and(|t| t.is_punct(':'))
                && tokens.get(next + 2).is_some_and(|t| t.is_punct(':'));
            if !separated {
                break;
            }
            next += 3;
        }
        if segments.len() > 1 {
            found.push((token.line, segments));
        }
    }
    found
}

/// The cycles of one crate's import graph: one violation for each group of
/// modules (a crate's top-level modules, a directory counting as one; the
/// root left out) that import each other round, and one for each group of
/// files.
fn cycles(graph: &ImportGraph) -> Vec<Violation> {
    let mut module_edges: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for ((from, to), &line) in &graph.edges {
        let (Some(a), Some(b)) = (graph.files[from].first(), graph.files[to].first()) else {
            continue;
        };
        if a != b {
            let entry = module_edges.entry((a.clone(), b.clone())).or_insert((from.clone(), line));
            *entry = (*entry).clone().min((from.clone(), line));
        }
    }
    let file_edges: BTreeMap<(String, String), (String, usize)> = graph
        .edges
        .iter()
        .map(|((from, to), &line)| ((from.clone(), to.clone()), (from.clone(), line)))
        .collect();
    let mut violations = cycles_of("module", &graph.krate, &module_edges);
    violations.extend(cycles_of("file", &graph.krate, &file_edges));
    violations
}

/// One violation for each strongly connected group of `edges` (node to
/// node, with the file and line that make the edge): its shortest cycle
/// from its first node, the pairs that import each other, and every edge
/// inside.
fn cycles_of(
    level: &str,
    krate: &str,
    edges: &BTreeMap<(String, String), (String, usize)>,
) -> Vec<Violation> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().push(to);
        graph.entry(to).or_default();
    }
    let mut violations = Vec::new();
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let start = component[0];
        let cycle = shortest_cycle(&graph, start, &component);
        let edge = |from: &str, to: &str| &edges[&(from.to_owned(), to.to_owned())];
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                let (file, line) = edge(pair[0], pair[1]);
                format!("{file}:{line} uses {}", pair[1])
            })
            .collect();
        let inside: Vec<String> = edges
            .iter()
            .filter(|((from, to), _)| {
                component.contains(&from.as_str()) && component.contains(&to.as_str())
            })
            .map(|((_, to), (file, line))| format!("{file}:{line} → {to}"))
            .collect();
        let mutual: Vec<String> = edges
            .keys()
            .filter(|(from, to)| from < to && edges.contains_key(&(to.clone(), from.clone())))
            .filter(|(from, _)| component.contains(&from.as_str()))
            .map(|(from, to)| format!("{from} ↔ {to}"))
            .collect();
        let (file, line) = edge(cycle[0], cycle[1]);
        violations.push(violation(
            &format!("{krate}{file}"),
            *line,
            format!(
                "{level} cycle among {{{}}}: {} ({}); {level}s that import each other: {}; \
                 every edge among them: {}",
                component.join(", "),
                cycle.join(" → "),
                steps.join(", "),
                if mutual.is_empty() { "none".to_owned() } else { mutual.join(", ") },
                inside.join(", ")
            ),
        ));
    }
    violations
}

/// The strongly connected components of `graph` (Tarjan), each sorted.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    /// The search's state.
    struct Tarjan<'a, 'g> {
        /// The graph searched.
        graph: &'g BTreeMap<&'a str, Vec<&'a str>>,
        /// Each visited node's visiting order.
        index: BTreeMap<&'a str, usize>,
        /// The lowest order each node reaches.
        low: BTreeMap<&'a str, usize>,
        /// The nodes of components not yet closed.
        stack: Vec<&'a str>,
        /// The nodes on `stack`.
        on_stack: BTreeSet<&'a str>,
        /// The components found so far.
        components: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a, '_> {
        /// Visits `node` and what it reaches, closing each component.
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
                // `path` is start, node, …, start: put it in order.
                path.reverse();
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

    /// A source at `path` with `text`.
    fn source(path: &str, text: &str) -> Source {
        Source { path: path.to_owned(), text: text.to_owned() }
    }

    /// The files, parsed (a file that does not parse fails the test).
    fn parsed(files: &[(&str, &str)]) -> Vec<Parsed> {
        let sources: Vec<Source> = files.iter().map(|(path, text)| source(path, text)).collect();
        let (parsed, failures) = parse_all(&sources);
        assert_eq!(failures, Vec::new(), "the inputs parse");
        parsed
    }

    /// The (file, line) of each violation.
    fn lines(violations: &[Violation]) -> Vec<(String, usize)> {
        violations.iter().map(|v| (v.path.clone(), v.line)).collect()
    }

    /// The 1-based line of the first `needle` in `text`.
    fn line_of(text: &str, needle: &str) -> usize {
        let at = text.find(needle).expect("the needle is in the text");
        text[..at].lines().count() + usize::from(text[..at].ends_with('\n') || at == 0)
    }

    #[test]
    fn tokens_leave_out_comments_and_strings_and_keep_lines() {
        let text = "//! M.\n\
                    fn f<'a>(x: &'a str) {\n\
                    let a = \"x // y\"; // unsafe\n\
                    let b = r#\"a \"quoted\" unsafe\"#;\n\
                    /* unsafe /* nested */ still */ let c = '\"';\n\
                    let d = b\"unsafe\"; let e = '\\'';\n\
                    /// A `reset` in a doc comment.\n\
                    let g = format!(\"{}\", \"in a macro\");\n\
                    unsafe {}\n\
                    }\n";
        let tree = parsed(&[("crates/a/src/f.rs", text)]);
        assert_eq!(lines(&unsafe_outside(&tree, &[])), vec![("crates/a/src/f.rs".into(), 9)]);
        let strings = string_literals(&tree[0].tokens);
        let strings: Vec<(usize, &str)> = strings.iter().map(|(l, s)| (*l, s.as_str())).collect();
        assert_eq!(
            strings,
            vec![
                (3, "x // y"),
                (4, "a \"quoted\" unsafe"),
                (6, "unsafe"),
                (8, "{}"),
                (8, "in a macro")
            ]
        );
    }

    #[test]
    fn use_trees_are_flattened_with_their_names() {
        let code =
            "use super::{driver::{self, Shell}, state::State as S};\npub use std::thread::sleep;";
        let tree = parsed(&[("crates/a/src/f.rs", code)]);
        let paths: Vec<(String, String, usize)> =
            tree[0].uses.iter().map(|p| (p.segments.join("::"), p.name.clone(), p.line)).collect();
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
    fn test_code_is_what_cfg_test_marks() {
        let parent = "//! M.\n\
            fn code() {\n\
            \x20   #[cfg(test)]\n\
            \x20   let x = 1;\n\
            \x20   let y = 2;\n\
            }\n\
            #[cfg(all(test, unix))]\n\
            fn helper() {}\n\
            #[cfg(not(test))]\n\
            fn real() {}\n\
            #[cfg(test)]\n\
            mod tests;\n\
            #[cfg(test)]\n\
            mod inline {\n\
            \x20   fn t() {}\n\
            }\n";
        let tree = parsed(&[
            ("crates/a/src/parent.rs", parent),
            ("crates/a/src/parent/tests.rs", "//! T.\nfn t() {}\n"),
            ("crates/a/src/parent/tests/more.rs", "//! T.\n"),
            ("crates/a/src/parent/other.rs", "//! O.\n"),
            ("crates/a/tests/it.rs", "//! I.\n"),
        ]);
        let test_lines: Vec<usize> = (1..=16).filter(|&line| tree[0].is_test(line)).collect();
        assert_eq!(test_lines, vec![3, 4, 7, 8, 11, 12, 13, 14, 15, 16]);
        let all_test: Vec<bool> = tree.iter().map(|file| file.all_test).collect();
        assert_eq!(all_test, vec![false, true, true, false, true]);
    }

    #[test]
    fn functions_are_found_with_their_owner_and_lines() {
        let text = "//! M.\n\
            fn free() {\n\
            \x20   fn nested() {}\n\
            }\n\
            impl Shell {\n\
            \x20   fn spawn(&self) {\n\
            \x20   }\n\
            }\n\
            trait Speak {\n\
            \x20   fn say(&self) {}\n\
            \x20   fn bare(&self);\n\
            }\n";
        let tree = parsed(&[("crates/a/src/f.rs", text)]);
        let found: Vec<(String, usize, usize)> =
            tree[0].functions.iter().map(|f| (f.qualified.clone(), f.start, f.end)).collect();
        assert_eq!(
            found,
            vec![
                ("free".into(), 2, 4),
                ("nested".into(), 3, 3),
                ("Shell::spawn".into(), 6, 7),
                ("Speak::say".into(), 10, 10),
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
        let code = "//! M.\n// unsafe in a comment\nconst S: &str = \"unsafe\";\n\
                    fn f() { unsafe { g() } }\nmacro_rules! m { () => { unsafe { g() } } }\n";
        let tree = parsed(&[
            ("crates/a/src/other.rs", code),
            ("crates/a/src/lint.rs", "//! M.\n#![allow(unsafe_code)]\n"),
            ("crates/a/src/allowed.rs", code),
            ("crates/a/src/words.rs", "//! M.\nstatic unsafely: u8 = not_unsafe;\n"),
        ]);
        assert_eq!(
            lines(&unsafe_outside(&tree, &["crates/a/src/allowed.rs"])),
            vec![
                ("crates/a/src/other.rs".into(), 4),
                ("crates/a/src/other.rs".into(), 5),
                ("crates/a/src/lint.rs".into(), 2)
            ]
        );
        // Each file of the list is allowed, and only those.
        assert_eq!(
            lines(&unsafe_outside(&tree, &["crates/a/src/allowed.rs", "crates/a/src/other.rs"])),
            vec![("crates/a/src/lint.rs".into(), 2)]
        );
    }

    #[test]
    fn an_unsafe_block_without_a_safety_comment_is_named() {
        let text = "//! M.\n\
            fn f() {\n\
            \x20   // SAFETY: said just above.\n\
            \x20   let a = unsafe { g() };\n\
            \x20   // SAFETY: said above the statement,\n\
            \x20   // on two lines.\n\
            \x20   check(\n\
            \x20       unsafe { g() },\n\
            \x20   );\n\
            \x20   // Not a safety comment.\n\
            \x20   let b = unsafe { g() };\n\
            \x20   // SAFETY: too far away.\n\
            \x20   let c = 1;\n\
            \x20   let d = unsafe { g() };\n\
            \x20   // SAFETY: above an attribute.\n\
            \x20   #[allow(unused)]\n\
            \x20   let e = unsafe { g() };\n\
            }\n";
        let tree = parsed(&[("crates/a/src/f.rs", text)]);
        assert_eq!(tree[0].unsafe_blocks.len(), 5);
        assert_eq!(
            lines(&safety_comments(&tree)),
            vec![("crates/a/src/f.rs".into(), 11), ("crates/a/src/f.rs".into(), 14)]
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
            }\n\
            /// Says `reset` in a doc comment.\n\
            fn g() -> String { format!(\"{} with `is_input`\", 1) }\n";
        let policy = "//! M.\nfn p() { seconds(e, \"no_output_timeout_sec\"); }\n\
            const M: &str = \"set no_output_timeout_sec\";\n";
        let tree = parsed(&[
            ("crates/engine/src/thing.rs", engine),
            (POLICY_FILE, policy),
            ("crates/engine/src/other.rs", policy),
            ("crates/server/src/tools.rs", engine),
        ]);
        let found = engine_strings(&tree);
        assert_eq!(
            lines(&found),
            vec![
                ("crates/engine/src/thing.rs".into(), 3),
                ("crates/engine/src/thing.rs".into(), 5),
                ("crates/engine/src/thing.rs".into(), 6),
                ("crates/engine/src/thing.rs".into(), 13),
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
            fn t() { let a = sleep(3); }\n\
            use std::thread::sleep as nap;\nfn u() { nap(D); }\n";
        let unit = "//! M.\nfn code() { std::thread::sleep(D); }\n\
            #[cfg(test)]\nmod tests {\n    fn t() { std::thread::sleep(D); }\n\
            \x20   fn wait_until() { std::thread::sleep(D); }\n}\n";
        let select = "//! M.\nasync fn t() {\n\
            \x20   tokio::select! { _ = tokio::time::sleep(D) => {} }\n}\n";
        let tree = parsed(&[
            ("crates/e/tests/it/main.rs", helper),
            ("crates/e/tests/it/other.rs", helper),
            ("crates/e/tests/it/bare.rs", bare),
            ("crates/e/tests/it/names.rs", helper_named_sleep),
            ("crates/e/tests/it/select.rs", select),
            ("crates/e/src/unit.rs", unit),
            ("crates/e/src/parent.rs", "//! M.\n#[cfg(test)]\nmod tests;\n"),
            ("crates/e/src/parent/tests.rs", "//! T.\nfn t() { std::thread::sleep(D); }\n"),
            ("crates/e/benches/bench.rs", bare),
        ]);
        let helpers =
            [("crates/e/tests/it/main.rs", "eventually"), ("crates/e/src/unit.rs", "wait_until")];
        let found = test_sleeps(&tree, &helpers);
        assert_eq!(
            lines(&found),
            vec![
                ("crates/e/tests/it/main.rs".into(), 6),
                ("crates/e/tests/it/other.rs".into(), 3),
                ("crates/e/tests/it/other.rs".into(), 6),
                ("crates/e/tests/it/bare.rs".into(), 4),
                ("crates/e/tests/it/names.rs".into(), 5),
                ("crates/e/tests/it/select.rs".into(), 3),
                ("crates/e/src/unit.rs".into(), 5),
                ("crates/e/src/parent/tests.rs".into(), 2),
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
        let paths: Vec<String> = files.iter().map(|(name, _)| format!("{dir}{name}.rs")).collect();
        let inputs: Vec<(&str, &str)> =
            paths.iter().zip(&files).map(|(path, (_, text))| (path.as_str(), *text)).collect();
        let all_cycles = |inputs: &[(&str, &str)]| -> Vec<Violation> {
            import_graphs(&parsed(inputs)).iter().flat_map(cycles).collect()
        };
        let found = all_cycles(&inputs);
        assert_eq!(lines(&found), vec![(format!("{dir}a.rs"), 2)], "{found:#?}");
        let message = &found[0].message;
        assert!(
            message.starts_with("file cycle among {session/a.rs, session/b.rs, session/c.rs}: "),
            "{message}"
        );
        assert!(
            message.contains("session/a.rs → session/b.rs → session/c.rs → session/a.rs"),
            "{message}"
        );
        assert!(
            message.contains("session/b.rs:2 uses session/c.rs")
                && message.contains("session/c.rs:2 uses session/a.rs"),
            "{message}"
        );
        assert!(!message.contains("d.rs"), "d is outside the cycle: {message}");
        assert!(message.contains("import each other: none"), "{message}");
        // The same files without the edge back: no cycle.
        let mut acyclic = inputs.clone();
        acyclic[3].1 = "//! C.\n";
        assert_eq!(all_cycles(&acyclic), Vec::new());
        // Two rooms that use each other inline.
        let (x, y) = (format!("{dir}x.rs"), format!("{dir}y.rs"));
        let found = all_cycles(&[
            (&x, "//! X.\nfn f() { crate::session::y::g() }\n"),
            (&y, "//! Y.\nfn g() { super::x::f() }\n"),
        ]);
        assert_eq!(lines(&found), vec![(x.clone(), 2)]);
        assert!(
            found[0].message.contains("files that import each other: session/x.rs ↔ session/y.rs"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_module_cycle_is_named_though_no_file_cycle_closes() {
        let lib = "//! E.\nmod cgroup;\nmod private_fs;\nmod process;\n\
            pub use process::proc_scan::start_ticks as ticks;\npub use std::time::Duration;\n";
        let process = "//! P.\nmod proc_scan;\nuse crate::cgroup::Group;\n";
        let proc_scan = "//! S.\npub fn start_ticks() {}\n\
            #[cfg(test)]\nmod tests { use crate::cgroup::Group; }\n";
        let cgroup = "//! C.\npub struct Group;\n\
            fn name() -> String { format!(\"{}\", crate::private_fs::random_hex()) }\n";
        let private_fs = "//! F.\npub fn random_hex() {}\nfn f() { crate::ticks() }\n";
        let leaf = "//! F.\npub fn random_hex() {}\npub(in crate::cgroup) fn g() {}\n\
            fn h() -> crate::Duration { todo!() }\n";
        let tree = |private_fs: &'static str| {
            parsed(&[
                ("crates/engine/src/lib.rs", lib),
                ("crates/engine/src/process/mod.rs", process),
                ("crates/engine/src/process/proc_scan.rs", proc_scan),
                ("crates/engine/src/cgroup.rs", cgroup),
                ("crates/engine/src/private_fs.rs", private_fs),
            ])
        };
        let graphs = import_graphs(&tree(private_fs));
        let edges: Vec<(&str, &str, usize)> = graphs[0]
            .edges
            .iter()
            .map(|((from, to), line)| (from.as_str(), to.as_str(), *line))
            .collect();
        assert_eq!(
            edges,
            vec![
                ("cgroup.rs", "private_fs.rs", 3),
                ("private_fs.rs", "process/proc_scan.rs", 3),
                ("process/mod.rs", "cgroup.rs", 3),
            ]
        );
        let found: Vec<Violation> = graphs.iter().flat_map(cycles).collect();
        assert_eq!(lines(&found), vec![("crates/engine/src/cgroup.rs".into(), 3)], "{found:#?}");
        assert!(
            found[0].message.starts_with(
                "module cycle among {cgroup, private_fs, process}: \
                 cgroup → private_fs → process → cgroup (cgroup.rs:3 uses private_fs, \
                 private_fs.rs:3 uses process, process/mod.rs:3 uses cgroup)"
            ),
            "{}",
            found[0].message
        );
        // The leaf that reaches up no more: no cycle at any level.
        let graphs = import_graphs(&tree(leaf));
        assert_eq!(graphs.iter().flat_map(cycles).collect::<Vec<_>>(), Vec::new());
    }

    #[test]
    fn the_front_door_is_private_modules_and_named_items() {
        let good_lib = "//! E.\nmod a;\nmod b;\npub use a::{A, B};\npub use b::f;\n";
        let bad_lib = "//! E.\npub mod a;\npub(crate) mod c;\nmod b;\npub use a::*;\n";
        let closed_lib = "//! E.\nmod a;\nuse a::A;\n";
        let manifest = "[workspace.lints.rust]\nunsafe_code = \"deny\"\nunreachable_pub = \"warn\"\n\
            [workspace.lints.clippy]\nall = { level = \"warn\", priority = -1 }\n\
            undocumented_unsafe_blocks = { level = \"deny\", priority = 1 }\n";
        let without = "[workspace.lints.rust]\nunsafe_code = \"deny\"\n\
            [workspace.lints.clippy]\nundocumented_unsafe_blocks = \"allow\"\n\
            [lints.rust]\nunreachable_pub = \"warn\"\n";
        let server = "//! S.\n#![warn(unreachable_pub)]\n\
            #![deny(clippy::all, clippy::undocumented_unsafe_blocks)]\nfn main() {}\n";
        let front_door_of = |lib: &str, main: &str, manifest: &str| {
            let tree = parsed(&[(ENGINE_ROOT, lib), ("crates/server/src/main.rs", main)]);
            front_door(&tree, manifest)
        };
        assert_eq!(front_door_of(good_lib, "//! S.\n", manifest), Vec::new());
        let found = front_door_of(bad_lib, "//! S.\n", without);
        let messages: Vec<(usize, &str)> =
            found.iter().map(|v| (v.line, v.message.split(": ").next().unwrap_or(""))).collect();
        assert_eq!(
            messages,
            vec![
                (2, "`pub mod a`"),
                (3, "`pub mod c`"),
                (5, "`pub use a::*`"),
                (1, "the lint `unreachable_pub` is not on"),
                (3, "the lint `clippy::undocumented_unsafe_blocks` is not on"),
            ],
            "{found:#?}"
        );
        assert_eq!(lines(&found)[3..], [("Cargo.toml".into(), 1), ("Cargo.toml".into(), 3)]);
        let found = front_door_of(closed_lib, "//! S.\n", manifest);
        assert_eq!(lines(&found), vec![(ENGINE_ROOT.into(), 1)]);
        assert!(found[0].message.starts_with("no `pub use`"), "{}", found[0].message);
        // The lints as attributes of every crate root, not in the manifest.
        let found = front_door_of(good_lib, server, without);
        assert_eq!(found.len(), 2, "the engine's root has neither: {found:#?}");
        let lib_with_lints = good_lib.replace(
            "mod a;",
            "#![forbid(unreachable_pub)]\n#![warn(clippy::undocumented_unsafe_blocks)]\nmod a;",
        );
        assert_eq!(front_door_of(&lib_with_lints, server, without), Vec::new());
    }

    #[test]
    fn a_production_function_over_the_budget_is_named() {
        let long = |name: &str, lines: usize| {
            format!("fn {name}() {{\n{}}}\n", "    step();\n".repeat(lines - 2))
        };
        let text = format!(
            "//! M.\n{}impl Shell {{\n{}}}\n{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            long("fits", FUNCTION_BUDGET),
            long("spawn", FUNCTION_BUDGET + 1),
            long("dispatch", FUNCTION_BUDGET + 40),
            long("long_test", FUNCTION_BUDGET + 1),
        );
        let tree = parsed(&[
            ("crates/a/src/f.rs", &text),
            ("crates/a/tests/t.rs", &format!("//! T.\n{}", long("t", 100))),
        ]);
        let found = function_budget(&tree, &[]);
        assert_eq!(
            lines(&found),
            vec![
                ("crates/a/src/f.rs".into(), line_of(&text, "fn spawn")),
                ("crates/a/src/f.rs".into(), line_of(&text, "fn dispatch")),
            ]
        );
        assert_eq!(found[0].message, "`fn Shell::spawn` is 81 lines long (the budget is 80)");
        // Allowed: the function passes; an entry that names none fails.
        let found = function_budget(
            &tree,
            &[("crates/a/src/f.rs", "Shell::spawn"), ("crates/a/src/f.rs", "fits")],
        );
        assert_eq!(
            lines(&found),
            vec![
                ("crates/a/src/f.rs".into(), line_of(&text, "fn dispatch")),
                ("crates/a/src/f.rs".into(), 1),
            ]
        );
        assert!(found[1].message.contains("`fn fits` is allowed"), "{}", found[1].message);
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
