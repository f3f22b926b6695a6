//! The timeout policy: command categories, their limits, and how a command
//! is matched to one. A policy file is the seed design's JSON format,
//! unchanged ([`Policy::from_json`]); matching copies Python's
//! `re.match(pattern, command, re.IGNORECASE)` (`Policy::first_match`);
//! a compound command gets the limits of its longest part
//! ([`Policy::explain`]); the embedded default keeps the seed's categories
//! ([`EMBEDDED_POLICY_JSON`]).
//!
//! Not here: running commands, enforcing limits, or watching the file for
//! changes. It turns text into a [`Policy`] and a command into a
//! [`Decision`]; apart from [`load_from_environment`] it reads no
//! environment variable, and apart from [`locate`] and [`load_policy`] it
//! touches no file.
//!
//! Invariant: a decision is bounded and never fails: linear in the
//! command's length, no recursion; an explicit timeout beats every pattern.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fancy_regex::Regex;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::limits::{self, CategoryLimits};
use crate::syntax;

/// The two limits a command runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest the command may run in all.
    pub exec: Duration,
    /// The longest the command may go without printing anything.
    pub no_output: Duration,
}

/// The JSON text of the embedded default policy, for a command that shows
/// it or writes it out as a starting point for a custom policy.
///
/// It keeps the seed's categories, numbers and patterns, each list starting
/// with the seed's own, with two deliberate changes that JSON has no room to
/// explain:
///
/// - `command_patterns` lists `extended` first, then `long`, `medium` and
///   `quick`. When patterns of two categories overlap, the longer limits are
///   the safer answer: a limit that is too short kills real work, one that
///   is too long only delays noticing a hang, and the no-output limit still
///   catches most hangs. This also lets the seed's `cargo build --release`
///   land in `extended` as the seed meant, instead of being caught by the
///   seed's broader `long` pattern for `cargo build`.
/// - Quick patterns, the seed's included, end in `` ([ \t][^;&|`(\n]*)?$ ``:
///   the command name must end at a word boundary (so `cat` does not match
///   `catalog-builder`), and the part must be a plain simple command: one
///   with a substitution (`echo $(make)`, whose `make` is a part of its
///   own) or an operator inside quotes is not quick. This also replaces the
///   seed's look-ahead `(?!.*push|pull|clone)` on
///   `git status|branch|log|diff`, whose alternation binds looser than its
///   author meant (it rejects a later `push` anywhere but a `pull` or
///   `clone` only right after the subcommand).
///
/// Patterns in the other categories are the seed's, verbatim, followed by
/// additions for common Unix tools that use `(\s|$)` as the word boundary.
/// A false match there can only lengthen a limit, never shorten it below
/// the default.
pub(crate) const EMBEDDED_POLICY_JSON: &str = include_str!("default_policy.json");

/// The origin reported for the embedded default policy.
pub(crate) const EMBEDDED_ORIGIN: &str = "embedded default";

/// The environment variable that names a policy file.
pub(crate) const POLICY_ENV_VAR: &str = "SHELLKEEP_POLICY";

/// Where the seed design keeps the policy, relative to the working directory.
pub(crate) const WORKING_DIR_POLICY: &str = "config/terminal_timeout_policy.json";

/// Where the user's policy lives, relative to the user's config directory.
pub(crate) const CONFIG_DIR_POLICY: &str = "shellkeep/policy.json";

/// The longest limit a policy or an agent may ask for: 365 days. Longer
/// values are surely mistakes, and a bound keeps `Instant + limit` from
/// overflowing wherever the limits are enforced.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// With an explicit timeout, the no-output limit is a quarter of it, but no
/// more than this...
const EXPLICIT_NO_OUTPUT_MAX: Duration = Duration::from_secs(60);
/// ...and no less than this (unless the whole timeout is shorter).
const EXPLICIT_NO_OUTPUT_MIN: Duration = Duration::from_secs(1);

/// A compiled timeout policy: categories with their limits, and the
/// patterns that sort commands into them.
#[derive(Debug, Clone)]
pub struct Policy {
    version: Option<String>,
    description: Option<String>,
    /// In the order of the `categories` object in the file.
    categories: Vec<Category>,
    /// Index into `categories`.
    default_category: usize,
    /// Every pattern, in the order they are tried.
    rules: Vec<Rule>,
}

/// One category of a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Category {
    /// The category's name, the key under `categories`.
    pub name: String,
    /// What the file says the category is for, if anything.
    pub description: Option<String>,
    /// The limits commands in this category run under.
    pub limits: Limits,
    /// The resource limits its `run` commands run under instead of the
    /// server's (the optional `limits` object: `memory_mib`, `tasks`,
    /// `cpu`); none by default.
    pub resources: CategoryLimits,
}

/// One compiled entry of `command_patterns`.
#[derive(Debug, Clone)]
struct Rule {
    /// Index into `Policy::categories`.
    category: usize,
    /// Position in the category's pattern list.
    index: usize,
    /// The pattern as written in the file.
    pattern: String,
    /// The pattern wrapped for `re.match` semantics.
    regex: Regex,
}

/// One entry of `command_patterns`, in the order patterns are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternEntry<'a> {
    /// The category the pattern sorts commands into.
    pub category: &'a str,
    /// The pattern's position in its category's list.
    pub index: usize,
    /// The pattern as written in the file.
    pub pattern: &'a str,
}

/// The limits chosen for one command, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The limits the command runs under.
    pub limits: Limits,
    /// The category whose limits apply; `None` for an explicit timeout.
    pub category: Option<String>,
    /// What chose the limits.
    pub source: DecisionSource,
}

/// The limits chosen for a command, with the parts that were matched
/// ([`Policy::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation<'c> {
    /// The limits the command runs under, and why.
    pub decision: Decision,
    /// The parts that run a command, in the order they start, each with
    /// its own decision; empty for an explicit timeout or a command matched
    /// whole.
    pub parts: Vec<PartDecision<'c>>,
    /// Parts not matched: past [`syntax::MAX_PARTS`], or past the
    /// matching budget ([`MATCH_BUDGET_PER_BYTE`]).
    pub omitted: usize,
    /// The index in `parts` of the part whose limits apply.
    pub winner: Option<usize>,
}

/// One part of a command and the limits it alone would get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartDecision<'c> {
    /// The part as written.
    pub text: &'c str,
    /// The text the pattern matched: the part's command, after the
    /// reserved words and the prefixes looked through (`sudo`, `env X=1`);
    /// for the default category, the command without its reserved words.
    pub command: &'c str,
    /// The part's category and limits, and the pattern that chose them.
    pub decision: Decision,
}

/// What chose a command's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionSource {
    /// The caller gave a timeout, which beats every pattern.
    Explicit,
    /// A pattern of the decision's category matched.
    Pattern {
        /// The pattern as written in the file.
        pattern: String,
        /// Its position in the category's list, as in
        /// `command_patterns.quick[1]`.
        index: usize,
    },
    /// No pattern matched, so the default category applies.
    Default,
}

/// A timeout an agent asked for, checked to be usable: positive, finite
/// and at most [`MAX_TIMEOUT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplicitTimeout(Duration);

/// Why a requested timeout cannot be used: the value asked for, which the
/// server words with the argument or flag that took it (`timeout_sec`,
/// `--timeout`); the `Display` is a short form for logs.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum InvalidTimeout {
    /// Zero, negative, not a number, or infinite.
    #[error("timeout {0} is not positive")]
    NotPositive(f64),
    /// Longer than [`MAX_TIMEOUT`].
    #[error("timeout {0} is over {max} s", max = MAX_TIMEOUT.as_secs())]
    TooLarge(f64),
}

impl ExplicitTimeout {
    /// Checks a timeout in (possibly fractional) seconds.
    pub fn from_secs_f64(secs: f64) -> Result<ExplicitTimeout, InvalidTimeout> {
        match seconds_to_duration(secs) {
            Ok(duration) => Ok(ExplicitTimeout(duration)),
            Err(SecondsProblem::NotPositive) => Err(InvalidTimeout::NotPositive(secs)),
            Err(SecondsProblem::TooLarge) => Err(InvalidTimeout::TooLarge(secs)),
        }
    }

    /// The timeout itself.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// The limits an explicit timeout gives, as in the seed design: the
    /// whole timeout to run, and a quarter of it (at most 60 s, at least
    /// 1 s, never more than the timeout) without output.
    pub fn limits(self) -> Limits {
        let exec = self.0;
        let no_output =
            (exec / 4).min(EXPLICIT_NO_OUTPUT_MAX).max(EXPLICIT_NO_OUTPUT_MIN).min(exec);
        Limits { exec, no_output }
    }
}

impl Decision {
    /// The same decision with the no-output limit an agent asked for
    /// explicitly. It replaces the one the policy or the explicit timeout
    /// gave (a quarter of the timeout, capped at 60 s); the execution limit
    /// is unchanged, and still fires first when it is the shorter.
    pub fn with_no_output(mut self, no_output: ExplicitTimeout) -> Decision {
        self.limits.no_output = no_output.duration();
        self
    }
}

impl TryFrom<f64> for ExplicitTimeout {
    type Error = InvalidTimeout;

    fn try_from(secs: f64) -> Result<ExplicitTimeout, InvalidTimeout> {
        ExplicitTimeout::from_secs_f64(secs)
    }
}

/// Why a policy could not be loaded. Each displays as one line that names
/// the file, the place in it and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file exists but could not be read.
    #[error("{origin}: cannot read the policy file: {error}")]
    Read {
        /// The file, as the caller named it.
        origin: String,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{origin}:{line}:{column}: invalid JSON: {message}")]
    Syntax {
        /// The file, as the caller named it.
        origin: String,
        /// The line of the mistake, from 1.
        line: usize,
        /// The column of the mistake, from 1 (0 at the end of a line).
        column: usize,
        /// What the JSON parser said, without its position.
        message: String,
    },
    /// The text is JSON, but not a valid policy.
    #[error("{origin}: {field}: {problem}")]
    Invalid {
        /// The file, as the caller named it.
        origin: String,
        /// The path of the offending field, such as
        /// `categories.long.exec_timeout_sec` or `command_patterns.quick[1]`.
        field: String,
        /// What is wrong with it.
        problem: Problem,
    },
}

/// What is wrong with one field of a policy file.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// A required field is absent.
    Missing,
    /// A field has the wrong JSON type.
    WrongType {
        /// What the field must be, such as "a string".
        expected: &'static str,
        /// What it is, such as "a number".
        found: &'static str,
    },
    /// A timeout is zero, negative or not finite.
    NotPositive(f64),
    /// A timeout is longer than [`MAX_TIMEOUT`].
    TooLarge(f64),
    /// A pattern does not compile.
    BadPattern(String),
    /// A name that must be a category is not one.
    UnknownCategory {
        /// The name used.
        name: String,
        /// The categories the file does define, in file order.
        defined: Vec<String>,
    },
    /// A key appears twice in the same object.
    DuplicateKey,
    /// A category's resource limit is out of range or unknown (the words
    /// say which).
    BadLimit(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing => write!(f, "this required field is missing; add it"),
            Problem::WrongType { expected, found } => {
                write!(f, "must be {expected}, not {found}")
            }
            Problem::NotPositive(value) => {
                write!(f, "must be a positive number of seconds, got {value}")
            }
            Problem::TooLarge(value) => write!(
                f,
                "must be at most {} seconds (365 days), got {value}",
                MAX_TIMEOUT.as_secs()
            ),
            Problem::BadLimit(message) => f.write_str(message),
            Problem::BadPattern(message) => {
                write!(f, "is not a valid regular expression: {message}")
            }
            Problem::UnknownCategory { name, defined } => {
                write!(f, "there is no category {name:?} in `categories` (")?;
                if defined.is_empty() {
                    write!(f, "it defines none")?;
                } else {
                    write!(f, "it defines {}", defined.join(", "))?;
                }
                write!(f, "); fix the name or add the category")
            }
            Problem::DuplicateKey => {
                write!(f, "appears more than once; merge the entries into one")
            }
        }
    }
}

impl Policy {
    /// Compiles a policy from JSON text. `origin` names the text in errors,
    /// usually the file's path.
    ///
    /// The format is the seed design's: `version` and `description` (both
    /// optional and informational), `categories` (name to `description`,
    /// `exec_timeout_sec`, `no_output_timeout_sec`, and optionally `limits`:
    /// the resource limits of the category's `run` commands,
    /// `{"memory_mib": 2048, "tasks": 512, "cpu": 2}`, each optional, see
    /// [`Policy::resources_for`]), `command_patterns` (category name to a
    /// list of regular expressions) and `default_category`. Keys not known
    /// here are ignored, so other tools may annotate the file; a key
    /// repeated within one object is an error, where Python would silently
    /// keep the last copy and drop, say, a whole list of patterns. Raw
    /// config first, validated config second (the ripgrep habit): the text
    /// is parsed into a plain JSON tree that keeps key order, and the
    /// policy is compiled from that tree, so every mistake is reported with
    /// the file, the field (`command_patterns.quick[1]`) and what to fix.
    pub fn from_json(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        // Editors on Windows, where the seed design comes from, like to
        // start UTF-8 files with a byte-order mark that JSON does not allow.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let tree: Json = serde_json::from_str(text).map_err(|error| PolicyError::Syntax {
            origin: origin.to_owned(),
            line: error.line(),
            column: error.column(),
            message: message_without_position(&error),
        })?;
        compile(&tree).map_err(|invalid| PolicyError::Invalid {
            origin: origin.to_owned(),
            field: invalid.field,
            problem: invalid.problem,
        })
    }

    /// Reads and compiles a policy file; errors name the file by its path.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Policy::from_json(&text, &origin),
            Err(error) => Err(PolicyError::Read { origin, error }),
        }
    }

    /// The embedded default policy (see the module documentation).
    pub fn embedded() -> Policy {
        Policy::from_json(EMBEDDED_POLICY_JSON, EMBEDDED_ORIGIN)
            .expect("the embedded default policy compiles; a unit test checks it")
    }

    /// The limits for `command`, and why: see [`Policy::explain`].
    pub fn decide(&self, command: &str, explicit: Option<ExplicitTimeout>) -> Decision {
        self.explain(command, explicit).decision
    }

    /// The limits for `command`, why, and the parts that were matched. An
    /// explicit timeout wins. Otherwise each part of the command
    /// ([`syntax::command_parts`]) gets the category of the first pattern
    /// that matches it (its command as written, then with each prefix
    /// looked through, see `look_through`) or the default category, and
    /// the part with the longest limits decides: the larger execution
    /// limit, then the larger no-output limit; the first such part on a
    /// tie. A command with no part that runs a command of its own (empty,
    /// only assignments) is matched whole.
    ///
    /// Why: the seed matched the start of the command only, so `cd demo &&
    /// cargo build --release` got the default category. A limit too short
    /// kills real work, one too long only delays noticing a hang, so the
    /// longest is the safe answer. A shell's command string written as it
    /// runs (`bash -c 'cd x && make'`, `eval 'make'`) is split into parts of
    /// its own. A pattern sees one part at a time: one written across `&&`
    /// or `|` no longer matches.
    ///
    /// Bounded: the split is linear in the command's length; at most
    /// [`syntax::MAX_PARTS`] parts are matched, each as at most
    /// [`MAX_LOOKS`] texts, a text that several parts share is matched
    /// once, and the bytes matched are at most [`MATCH_BUDGET_PER_BYTE`]
    /// times the command's (plus 4 KiB). Parts past these bounds are
    /// counted in [`Explanation::omitted`].
    pub fn explain<'c>(
        &self,
        command: &'c str,
        explicit: Option<ExplicitTimeout>,
    ) -> Explanation<'c> {
        if let Some(timeout) = explicit {
            return Explanation {
                decision: Decision {
                    limits: timeout.limits(),
                    category: None,
                    source: DecisionSource::Explicit,
                },
                parts: Vec::new(),
                omitted: 0,
                winner: None,
            };
        }
        let (parts, omitted) = self.match_parts(command);
        if parts.is_empty() {
            let rule = self.first_match(command.trim_start());
            return Explanation { decision: self.decision_for(rule), parts, omitted, winner: None };
        }
        let winner = longest(&parts);
        Explanation {
            decision: parts[winner].decision.clone(),
            parts,
            omitted,
            winner: Some(winner),
        }
    }

    /// Each part of `command` with its decision, in the order they are
    /// matched, and how many parts were not matched (past the bounds of
    /// [`Policy::explain`]).
    fn match_parts<'c>(&self, command: &'c str) -> (Vec<PartDecision<'c>>, usize) {
        let split = syntax::command_parts(command);
        let mut omitted = split.omitted;
        let mut matcher = Matcher {
            policy: self,
            matched: HashMap::new(),
            // Nested parts and looked-through prefixes match the same bytes
            // again; this keeps the bytes matched linear in the command's.
            budget: command.len().saturating_mul(MATCH_BUDGET_PER_BYTE).saturating_add(4096),
        };
        let mut parts = Vec::new();
        // The parts still to match, each list with the number of shell
        // command strings (`bash -c '…'`) it is inside: a stack, not
        // recursion.
        let mut pending = vec![(split.parts.into_iter(), 0)];
        while let Some((list, strings)) = pending.last_mut() {
            let strings = *strings;
            let Some(part) = list.next() else {
                pending.pop();
                continue;
            };
            let Some(texts) = looks(part.text) else { continue };
            if parts.len() >= syntax::MAX_PARTS || matcher.budget < texts[0].len() {
                omitted += 1;
                continue;
            }
            let (command, rule) = match matcher.first_of(&texts) {
                Some((text, rule)) => (text, Some(rule)),
                None => (texts[0], None),
            };
            parts.push(PartDecision {
                text: part.text,
                command,
                decision: self.decision_for(rule),
            });
            // A shell's command string holds parts of its own, matched
            // after this one.
            if strings < MAX_SHELL_STRINGS
                && let Some(string) = texts.iter().find_map(|text| shell_string(text))
            {
                let inner = syntax::command_parts(string);
                omitted += inner.omitted;
                pending.push((inner.parts.into_iter(), strings + 1));
            }
        }
        (parts, omitted)
    }

    /// The index of the first rule whose pattern matches `text`, as
    /// Python's `re.match(pattern, text, re.IGNORECASE)` would (the seed's
    /// reference code): case-insensitive, anchored at the start of the text
    /// but not at its end, with look-around available (hence
    /// `fancy-regex`). Rules are in file order: categories in the order
    /// their keys appear in `command_patterns`, patterns in list order.
    fn first_match(&self, text: &str) -> Option<usize> {
        for (index, rule) in self.rules.iter().enumerate() {
            match rule.regex.is_match(text) {
                Ok(false) => {}
                Ok(true) => return Some(index),
                // Only a pathological pattern exhausts the backtracking
                // budget; skipping it still gives the command some limits.
                Err(error) => tracing::warn!(
                    category = %self.categories[rule.category].name,
                    pattern = %rule.pattern,
                    %error,
                    "a timeout policy pattern failed to run and was skipped"
                ),
            }
        }
        None
    }

    /// The decision a matching rule gives, or the default category's.
    fn decision_for(&self, rule: Option<usize>) -> Decision {
        match rule.map(|index| &self.rules[index]) {
            Some(rule) => {
                let category = &self.categories[rule.category];
                Decision {
                    limits: category.limits,
                    category: Some(category.name.clone()),
                    source: DecisionSource::Pattern {
                        pattern: rule.pattern.clone(),
                        index: rule.index,
                    },
                }
            }
            None => {
                let category = self.default_category();
                Decision {
                    limits: category.limits,
                    category: Some(category.name.clone()),
                    source: DecisionSource::Default,
                }
            }
        }
    }

    /// The category whose resource limits a command runs under (the one
    /// its patterns choose, whatever timeout is given), and those limits.
    pub fn resources_for(&self, command: &str) -> (&Category, CategoryLimits) {
        let decision = self.decide(command, None);
        let category = decision
            .category
            .as_deref()
            .and_then(|name| self.category(name))
            .unwrap_or_else(|| self.default_category());
        (category, category.resources)
    }

    /// The categories, in the order the file defines them.
    pub fn categories(&self) -> &[Category] {
        &self.categories
    }

    /// The category by name, if the policy defines it.
    pub fn category(&self, name: &str) -> Option<&Category> {
        self.categories.iter().find(|category| category.name == name)
    }

    /// The category for commands no pattern matches.
    pub fn default_category(&self) -> &Category {
        &self.categories[self.default_category]
    }

    /// Every pattern, in the order they are tried.
    pub fn patterns(&self) -> impl Iterator<Item = PatternEntry<'_>> + '_ {
        self.rules.iter().map(|rule| PatternEntry {
            category: &self.categories[rule.category].name,
            index: rule.index,
            pattern: &rule.pattern,
        })
    }

    /// The file's `version`, if it has one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The file's `description`, if it has one.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

/// The bytes matched against the patterns, over all parts and the texts
/// looked through in them, are at most this many per byte of the command
/// (plus 4 KiB); parts past that are not matched, and counted in
/// [`Explanation::omitted`]. The top-level parts together are never longer
/// than the command, so only deep nesting or long chains of prefixes reach
/// it.
pub(crate) const MATCH_BUDGET_PER_BYTE: usize = 2;

/// At most this many texts of one part are matched: its command as
/// written, then with each prefix looked through.
pub(crate) const MAX_LOOKS: usize = 8;

/// The part with the longest limits: the larger execution limit, then
/// the larger no-output limit; the first such part on a tie.
fn longest(parts: &[PartDecision<'_>]) -> usize {
    let mut winner = 0;
    for (index, part) in parts.iter().enumerate() {
        let longest = &parts[winner].decision.limits;
        let limits = &part.decision.limits;
        if (limits.exec, limits.no_output) > (longest.exec, longest.no_output) {
            winner = index;
        }
    }
    winner
}

/// Matching the texts of a command's parts against a policy's patterns,
/// each text once, within a budget of bytes.
struct Matcher<'p, 'c> {
    policy: &'p Policy,
    /// The first rule each text matched (`None`: none), as matched so far.
    matched: HashMap<&'c str, Option<usize>>,
    /// The bytes that may still be matched.
    budget: usize,
}

impl<'c> Matcher<'_, 'c> {
    /// The first of `texts` (a part's looks, in order) that a rule matches,
    /// with that rule; `None` when none does or the budget runs out first.
    fn first_of(&mut self, texts: &[&'c str]) -> Option<(&'c str, usize)> {
        for &text in texts {
            let rule = match self.matched.get(text) {
                Some(rule) => *rule,
                None if self.budget >= text.len() => {
                    self.budget -= text.len();
                    let rule = self.policy.first_match(text);
                    self.matched.insert(text, rule);
                    rule
                }
                None => return None,
            };
            if let Some(rule) = rule {
                return Some((text, rule));
            }
        }
        None
    }
}

/// The texts of a part that are matched, in order: its command as written
/// (after the reserved words before it), then with each prefix looked
/// through in turn ([`look_through`]); `None` when the part runs no command
/// of its own ([`syntax::command_of`]).
fn looks(part: &str) -> Option<Vec<&str>> {
    let mut text = syntax::command_of(part)?;
    let mut texts = vec![text];
    while texts.len() < MAX_LOOKS {
        let Some(next) = look_through(text) else { break };
        texts.push(next);
        text = next;
    }
    Some(texts)
}

/// Shell command strings inside each other (`bash -c "sh -c '…'"`) whose
/// parts are matched; deeper strings count as text of their part. (Strings
/// written without escapes, the only ones looked into, nest three deep at
/// most: `eval "eval 'eval x'"`.)
pub(crate) const MAX_SHELL_STRINGS: usize = 4;

/// Shells whose `-c` string is a command of its own.
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh"];

/// The command string a shell runs (`bash -c 'cd x && make'`, `sh -ec
/// "make"`, `eval 'make -j8'`), when its text is the command as written:
/// in single quotes, or in double quotes or bare without a `\`. A string
/// with escapes or expansions to undo is not looked into.
fn shell_string(text: &str) -> Option<&str> {
    let (word, mut rest) = syntax::split_word(text)?;
    let name = word.rsplit('/').next().unwrap_or(word);
    if name == "eval" {
        let (string, after) = syntax::split_word(rest)?;
        return if after.is_empty() { literal(string) } else { None };
    }
    if !SHELLS.contains(&name) {
        return None;
    }
    let mut has_string = false;
    while let Some((word, after)) = syntax::split_word(rest) {
        if !(word.starts_with('-') || word.starts_with('+')) || word == "--" || word == "-" {
            break;
        }
        rest = after;
        if matches!(word, "-o" | "+o" | "-O" | "+O") {
            rest = syntax::split_word(rest).map_or("", |(_, after)| after);
        } else if !word.starts_with("--") && word[1..].contains('c') {
            has_string = true;
        }
    }
    if !has_string {
        return None;
    }
    literal(syntax::split_word(rest)?.0)
}

/// The text of a word that means itself: `'…'` without another `'`,
/// `"…"` without `"` or `\` inside, or a bare word without quotes or `\`.
fn literal(word: &str) -> Option<&str> {
    if let Some(inner) = word.strip_prefix('\'').and_then(|word| word.strip_suffix('\'')) {
        return (!inner.contains('\'')).then_some(inner);
    }
    if let Some(inner) = word.strip_prefix('"').and_then(|word| word.strip_suffix('"')) {
        return (!inner.contains(['"', '\\'])).then_some(inner);
    }
    (!word.contains(['\'', '"', '\\'])).then_some(word)
}

/// A command that runs the command after its options, so the policy looks
/// through it: its name, the options that take a value (the next word),
/// the options with which it runs no command, and how many operands come
/// before the command.
struct Wrapper {
    name: &'static str,
    with_value: &'static [&'static str],
    no_command: &'static [&'static str],
    operands: usize,
}

/// The prefixes the policy looks through. `xargs` and `watch` are not
/// among them: the command they run is built from arguments or a string,
/// not the words that follow; a shell's `-c` string and `eval`'s are split
/// into parts of their own instead (`shell_string`).
const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "env",
        with_value: &["-u", "--unset", "-C", "--chdir"],
        no_command: &["-S", "--split-string", "--help", "--version"],
        operands: 0,
    },
    Wrapper {
        name: "sudo",
        with_value: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-r",
            "--role",
            "-t",
            "--type",
            "-U",
            "--other-user",
            "-T",
            "--command-timeout",
            "-R",
            "--chroot",
        ],
        no_command: &[
            "-l",
            "--list",
            "-e",
            "--edit",
            "-v",
            "--validate",
            "-V",
            "--version",
            "-K",
            "--remove-timestamp",
            "--help",
        ],
        operands: 0,
    },
    Wrapper { name: "doas", with_value: &["-u", "-C"], no_command: &[], operands: 0 },
    Wrapper { name: "nice", with_value: &["-n", "--adjustment"], no_command: &[], operands: 0 },
    Wrapper { name: "nohup", with_value: &[], no_command: &[], operands: 0 },
    Wrapper {
        name: "time",
        with_value: &["-f", "--format", "-o", "--output"],
        no_command: &[],
        operands: 0,
    },
    Wrapper {
        name: "timeout",
        with_value: &["-s", "--signal", "-k", "--kill-after"],
        no_command: &["--help", "--version"],
        operands: 1,
    },
    Wrapper { name: "command", with_value: &[], no_command: &["-v", "-V"], operands: 0 },
    Wrapper { name: "builtin", with_value: &[], no_command: &[], operands: 0 },
    Wrapper { name: "exec", with_value: &["-a"], no_command: &[], operands: 0 },
    Wrapper {
        name: "stdbuf",
        with_value: &["-i", "-o", "-e", "--input", "--output", "--error"],
        no_command: &[],
        operands: 0,
    },
    Wrapper {
        name: "ionice",
        with_value: &["-c", "--class", "-n", "--classdata"],
        no_command: &["-p", "--pid", "-P", "--pgid", "-u", "--uid"],
        operands: 0,
    },
    Wrapper { name: "setsid", with_value: &[], no_command: &[], operands: 0 },
];

/// `text` with one prefix looked through: the assignments and
/// redirections before its command (`FOO=1 make`), else a [`WRAPPERS`]
/// command with its options and operands (`sudo -u me make`, `timeout 5
/// make`, `/usr/bin/env make`). `None` when there is no prefix, or nothing
/// after it.
fn look_through(text: &str) -> Option<&str> {
    let command = syntax::skip_assignments(text);
    if command.len() < text.len() {
        return Some(command).filter(|command| !command.is_empty());
    }
    let (word, mut rest) = syntax::split_word(text)?;
    let name = word.rsplit('/').next().unwrap_or(word);
    let wrapper = WRAPPERS.iter().find(|wrapper| wrapper.name == name)?;
    while let Some((word, after)) = syntax::split_word(rest) {
        if word == "--" {
            rest = after;
            break;
        }
        if !word.starts_with('-') {
            break;
        }
        let option = word.split('=').next().unwrap_or(word);
        if wrapper.no_command.contains(&option) {
            return None;
        }
        rest = after;
        if wrapper.with_value.contains(&word) {
            rest = syntax::split_word(rest).map_or("", |(_, after)| after);
        }
    }
    for _ in 0..wrapper.operands {
        rest = syntax::split_word(rest)?.1;
    }
    Some(rest).filter(|rest| !rest.is_empty())
}

/// Where the policy comes from, as [`locate`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// Read the policy from this file.
    File {
        /// The file, made absolute against the working directory.
        path: PathBuf,
        /// How it was found.
        source: LocationSource,
    },
    /// `--policy` or the environment named a file that does not exist; the
    /// embedded default applies, and the caller is told.
    Missing {
        /// The file, made absolute against the working directory.
        path: PathBuf,
        /// Who named it.
        source: LocationSource,
    },
    /// Nothing named a file and none was found; the embedded default applies.
    Embedded,
}

/// How a policy file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocationSource {
    /// The `--policy` flag named it.
    Flag,
    /// The `SHELLKEEP_POLICY` environment variable named it.
    Environment,
    /// It is the seed's `config/terminal_timeout_policy.json` under the
    /// working directory.
    WorkingDirectory,
    /// It is `shellkeep/policy.json` in the user's config directory.
    ConfigDirectory,
}

impl fmt::Display for LocationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LocationSource::Flag => "--policy",
            LocationSource::Environment => POLICY_ENV_VAR,
            LocationSource::WorkingDirectory => "the working directory",
            LocationSource::ConfigDirectory => "the user config directory",
        })
    }
}

/// A policy ready to use, with where it came from.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    /// The compiled policy.
    pub policy: Policy,
    /// The file's path, or [`EMBEDDED_ORIGIN`].
    pub origin: String,
    /// Something the caller should log on stderr, such as a named policy
    /// file that does not exist.
    pub notice: Option<String>,
}

/// The user's config directory: `XDG_CONFIG_HOME` if it is an absolute
/// path, else `$HOME/.config`. Relative or empty values are ignored, as the
/// XDG base directory specification asks.
pub(crate) fn config_home(
    xdg_config_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Option<PathBuf> {
    let absolute = |value: &OsStr| Some(PathBuf::from(value)).filter(|path| path.is_absolute());
    xdg_config_home
        .and_then(absolute)
        .or_else(|| home.and_then(absolute).map(|home| home.join(".config")))
}

/// Finds the policy file, in order: the `--policy` flag, the
/// `SHELLKEEP_POLICY` variable (`env`, ignored when empty),
/// `config/terminal_timeout_policy.json` under `cwd`, then
/// `shellkeep/policy.json` under `config_home` (see [`config_home`]).
///
/// A file named by the flag or the variable is used even if it is missing
/// (the result is then [`Location::Missing`]); the later places are skipped
/// when absent. Relative paths are taken against `cwd`. This looks at the
/// file system but reads no environment: the caller passes it in.
pub(crate) fn locate(
    flag: Option<&Path>,
    env: Option<&OsStr>,
    cwd: &Path,
    config_home: Option<&Path>,
) -> Location {
    let named = flag.map(|path| (path, LocationSource::Flag)).or_else(|| {
        env.filter(|value| !value.is_empty())
            .map(|value| (Path::new(value), LocationSource::Environment))
    });
    if let Some((path, source)) = named {
        let path = cwd.join(path);
        return if may_exist(&path) {
            Location::File { path, source }
        } else {
            Location::Missing { path, source }
        };
    }
    let implicit = [
        Some((cwd.join(WORKING_DIR_POLICY), LocationSource::WorkingDirectory)),
        config_home.map(|dir| (dir.join(CONFIG_DIR_POLICY), LocationSource::ConfigDirectory)),
    ];
    implicit
        .into_iter()
        .flatten()
        .find(|(path, _)| may_exist(path))
        .map_or(Location::Embedded, |(path, source)| Location::File { path, source })
}

/// Whether a file is there, counting "cannot tell" as yes: reading it will
/// then fail with an error that says why, rather than the file being
/// silently passed over.
fn may_exist(path: &Path) -> bool {
    path.try_exists().unwrap_or(true)
}

/// Loads the policy from where [`locate`] found it. A missing named file
/// gives the embedded default and a notice; a file that exists but cannot
/// be read or is not a valid policy is an error, and start-up should stop.
pub(crate) fn load_policy(location: &Location) -> Result<LoadedPolicy, PolicyError> {
    match location {
        Location::File { path, .. } => Ok(LoadedPolicy {
            policy: Policy::from_file(path)?,
            origin: path.display().to_string(),
            notice: None,
        }),
        Location::Missing { path, source } => Ok(LoadedPolicy {
            policy: Policy::embedded(),
            origin: EMBEDDED_ORIGIN.to_owned(),
            notice: Some(format!(
                "policy file {} (named by {source}) not found; using the embedded default policy",
                path.display()
            )),
        }),
        Location::Embedded => Ok(LoadedPolicy {
            policy: Policy::embedded(),
            origin: EMBEDDED_ORIGIN.to_owned(),
            notice: None,
        }),
    }
}

/// [`locate`] and [`load_policy`] with this process's `SHELLKEEP_POLICY`,
/// working directory, `XDG_CONFIG_HOME` and `HOME`.
pub fn load_from_environment(flag: Option<&Path>) -> Result<LoadedPolicy, PolicyError> {
    let env = std::env::var_os(POLICY_ENV_VAR);
    // Without a working directory (it was deleted), relative paths still
    // resolve against "." as the operating system sees it.
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let config_home = config_home(
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    );
    load_policy(&locate(flag, env.as_deref(), &cwd, config_home.as_deref()))
}

/// Why a number of seconds is not a usable limit.
enum SecondsProblem {
    NotPositive,
    TooLarge,
}

fn seconds_to_duration(secs: f64) -> Result<Duration, SecondsProblem> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(SecondsProblem::NotPositive);
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(duration) if duration > MAX_TIMEOUT => Err(SecondsProblem::TooLarge),
        // Below a nanosecond the value rounds to nothing.
        Ok(duration) if duration.is_zero() => Err(SecondsProblem::NotPositive),
        Ok(duration) => Ok(duration),
        Err(_) => Err(SecondsProblem::TooLarge),
    }
}

/// serde_json's message ends in " at line L column C"; the error reports
/// the position in its own place.
fn message_without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&suffix) {
        Some(stripped) => stripped.to_owned(),
        None => message,
    }
}

/// A JSON value that, unlike `serde_json::Value` without its
/// `preserve_order` feature, keeps object keys in file order: pattern
/// order is part of a policy's meaning.
#[derive(Debug)]
enum Json {
    Null,
    Bool,
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Json, E> {
        Ok(Json::Bool)
    }

    // JSON has one number type; a policy only needs seconds, where f64 is
    // exact for any sensible value.
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Json, E> {
        Ok(Json::Number(value as f64))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Json, E> {
        Ok(Json::Number(value as f64))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json, E> {
        Ok(Json::Number(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Json, E> {
        Ok(Json::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry()? {
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// A validation failure before the origin is attached.
struct Invalid {
    field: String,
    problem: Problem,
}

impl Invalid {
    fn new(field: &str, problem: Problem) -> Invalid {
        Invalid { field: field.to_owned(), problem }
    }

    fn wrong_type(field: &str, expected: &'static str, found: &Json) -> Invalid {
        Invalid::new(field, Problem::WrongType { expected, found: found.kind() })
    }
}

/// The path of `key` inside the object at `parent`.
fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() { key.to_owned() } else { format!("{parent}.{key}") }
}

/// The entries of the object at `field`, which must have no repeated keys:
/// JSON parsers disagree on which copy wins, and a lost list of patterns is
/// worse than an error.
fn object<'a>(value: &'a Json, field: &str) -> Result<&'a [(String, Json)], Invalid> {
    let Json::Object(entries) = value else {
        let field = if field.is_empty() { "top level" } else { field };
        return Err(Invalid::wrong_type(field, "an object", value));
    };
    let mut seen = HashSet::new();
    for (key, _) in entries {
        if !seen.insert(key.as_str()) {
            return Err(Invalid::new(&child(field, key), Problem::DuplicateKey));
        }
    }
    Ok(entries)
}

fn get<'a>(entries: &'a [(String, Json)], key: &str) -> Option<&'a Json> {
    entries.iter().find(|(name, _)| name == key).map(|(_, value)| value)
}

fn required<'a>(
    entries: &'a [(String, Json)],
    key: &str,
    field: &str,
) -> Result<&'a Json, Invalid> {
    get(entries, key).ok_or_else(|| Invalid::new(field, Problem::Missing))
}

/// An optional string; `null` counts as absent.
fn optional_string(
    entries: &[(String, Json)],
    key: &str,
    parent: &str,
) -> Result<Option<String>, Invalid> {
    match get(entries, key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(Invalid::wrong_type(&child(parent, key), "a string", other)),
    }
}

fn seconds(entries: &[(String, Json)], key: &str, parent: &str) -> Result<Duration, Invalid> {
    let field = child(parent, key);
    match required(entries, key, &field)? {
        Json::Number(secs) => seconds_to_duration(*secs).map_err(|problem| {
            let problem = match problem {
                SecondsProblem::NotPositive => Problem::NotPositive(*secs),
                SecondsProblem::TooLarge => Problem::TooLarge(*secs),
            };
            Invalid::new(&field, problem)
        }),
        other => Err(Invalid::wrong_type(&field, "a number of seconds", other)),
    }
}

/// A category's optional `limits` object: `memory_mib` (whole MiB, at
/// least [`limits::MIN_MEMORY`]), `tasks` (at least [`limits::MIN_TASKS`]),
/// `cpu` (CPUs, from [`limits::MIN_CPU`] to [`limits::MAX_CPU`]). A key it
/// does not know is an error: a misspelt limit would silently not apply.
fn category_limits(entries: &[(String, Json)], parent: &str) -> Result<CategoryLimits, Invalid> {
    let field = child(parent, "limits");
    let Some(value) = get(entries, "limits").filter(|value| !matches!(value, Json::Null)) else {
        return Ok(CategoryLimits::default());
    };
    let mut resources = CategoryLimits::default();
    for (key, value) in object(value, &field)? {
        let field = child(&field, key);
        let Json::Number(number) = value else {
            return Err(Invalid::wrong_type(&field, "a number", value));
        };
        let number = *number;
        let whole = |min: u64, max: u64, unit: &str| {
            let fits = number.fract() == 0.0 && number >= min as f64 && number <= max as f64;
            fits.then_some(number as u64).ok_or_else(|| {
                Invalid::new(
                    &field,
                    Problem::BadLimit(format!(
                        "must be a whole number of {unit} from {min} to {max}, got {number}"
                    )),
                )
            })
        };
        match key.as_str() {
            "memory_mib" => {
                resources.memory_mib = Some(whole(limits::MIN_MEMORY >> 20, 1 << 20, "MiB")?)
            }
            "tasks" => resources.tasks = Some(whole(limits::MIN_TASKS, 1 << 22, "tasks")?),
            "cpu" if (limits::MIN_CPU..=limits::MAX_CPU).contains(&number) => {
                resources.cpu = Some(number);
            }
            "cpu" => {
                return Err(Invalid::new(
                    &field,
                    Problem::BadLimit(format!(
                        "must be a number of CPUs from {} to {}, got {number}",
                        limits::MIN_CPU,
                        limits::MAX_CPU
                    )),
                ));
            }
            _ => {
                return Err(Invalid::new(
                    &field,
                    Problem::BadLimit("is not a limit: use memory_mib, tasks or cpu".to_owned()),
                ));
            }
        }
    }
    Ok(resources)
}

/// Compiles `pattern` for Python `re.match` semantics with `re.IGNORECASE`.
fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    // Compiling the pattern alone first keeps a stray `)` from closing our
    // wrapper group and compiling into something the author never wrote.
    Regex::new(pattern).map_err(|error| pattern_error_message(&error))?;
    Regex::new(&format!("(?i)^(?:{pattern})")).map_err(|error| pattern_error_message(&error))
}

/// A one-line message for a pattern that does not compile. Errors from the
/// underlying regex crate say only "error parsing pattern 0" at the top; the
/// cause is at the end of their source chain, in a several-line message with
/// a caret diagram whose `error:` line is the part worth showing.
fn pattern_error_message(error: &fancy_regex::Error) -> String {
    let fancy_regex::Error::CompileError(fancy_regex::CompileError::InnerError(inner)) = error
    else {
        return error.to_string();
    };
    let mut cause: &dyn std::error::Error = inner;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    let detail = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("error: "))
        .map_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "), str::to_owned);
    format!("Error compiling regex: {detail}")
}

fn compile(tree: &Json) -> Result<Policy, Invalid> {
    let top = object(tree, "")?;
    let version = match get(top, "version") {
        None | Some(Json::Null) => None,
        Some(Json::String(text)) => Some(text.clone()),
        // A bare `1.0` is a natural thing to write, and the version is
        // informational: accept it as written.
        Some(Json::Number(number)) => Some(number.to_string()),
        Some(other) => return Err(Invalid::wrong_type("version", "a string", other)),
    };
    let description = optional_string(top, "description", "")?;

    let categories_value = required(top, "categories", "categories")?;
    let mut categories = Vec::new();
    for (name, value) in object(categories_value, "categories")? {
        let field = child("categories", name);
        let entries = object(value, &field)?;
        categories.push(Category {
            name: name.clone(),
            description: optional_string(entries, "description", &field)?,
            limits: Limits {
                exec: seconds(entries, "exec_timeout_sec", &field)?,
                no_output: seconds(entries, "no_output_timeout_sec", &field)?,
            },
            resources: category_limits(entries, &field)?,
        });
    }
    let find_category = |name: &str, field: &str| {
        categories.iter().position(|category| category.name == name).ok_or_else(|| {
            Invalid::new(
                field,
                Problem::UnknownCategory {
                    name: name.to_owned(),
                    defined: categories.iter().map(|c| c.name.clone()).collect(),
                },
            )
        })
    };

    let mut rules = Vec::new();
    match get(top, "command_patterns") {
        // A policy without patterns is legal: every command gets the
        // default category.
        None | Some(Json::Null) => {}
        Some(value) => {
            for (name, list) in object(value, "command_patterns")? {
                let field = child("command_patterns", name);
                let category = find_category(name, &field)?;
                let Json::Array(patterns) = list else {
                    return Err(Invalid::wrong_type(&field, "a list of regular expressions", list));
                };
                for (index, pattern) in patterns.iter().enumerate() {
                    let field = format!("{field}[{index}]");
                    let Json::String(pattern) = pattern else {
                        return Err(Invalid::wrong_type(&field, "a string", pattern));
                    };
                    let regex = compile_pattern(pattern)
                        .map_err(|message| Invalid::new(&field, Problem::BadPattern(message)))?;
                    rules.push(Rule { category, index, pattern: pattern.clone(), regex });
                }
            }
        }
    }

    let default_category = match required(top, "default_category", "default_category")? {
        Json::String(name) => find_category(name, "default_category")?,
        other => return Err(Invalid::wrong_type("default_category", "a string", other)),
    };

    Ok(Policy { version, description, categories, default_category, rules })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy file from the seed design, byte for byte.
    const SEED_JSON: &str = r##"{
  "version": "1.0",
  "description": "Terminal command timeout policy",
  "categories": {
    "quick": {
      "description": "Instant commands (ls, dir, echo, git status)",
      "exec_timeout_sec": 30,
      "no_output_timeout_sec": 10
    },
    "medium": {
      "description": "Scripts, tests, small compilations",
      "exec_timeout_sec": 120,
      "no_output_timeout_sec": 30
    },
    "long": {
      "description": "Package install, builds, indexing",
      "exec_timeout_sec": 600,
      "no_output_timeout_sec": 60
    },
    "extended": {
      "description": "Training, large builds (use sparingly)",
      "exec_timeout_sec": 900,
      "no_output_timeout_sec": 120
    }
  },
  "command_patterns": {
    "quick": [
      "^(ls|dir|pwd|echo|cat|type|Get-ChildItem|Write-Host|Test-Path)",
      "^git (status|branch|log|diff)(?!.*push|pull|clone)",
      "^(whoami|hostname|date)"
    ],
    "medium": [
      "^pwsh .+\\.ps1",
      "^(npm|cargo|dotnet) (test|run check)",
      "^python .+\\.py(?!.*train)"
    ],
    "long": [
      "^(npm|cargo|dotnet) (install|build|publish)",
      "^git (clone|pull|push|fetch)",
      "^pip install"
    ],
    "extended": [
      "llamafactory-cli train",
      "cargo build --release",
      "npm run build:prod"
    ]
  },
  "default_category": "medium"
}"##;

    fn secs(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn limits(exec: Duration, no_output: Duration) -> Limits {
        Limits { exec, no_output }
    }

    fn seed() -> Policy {
        Policy::from_json(SEED_JSON, "seed.json").unwrap()
    }

    /// Where a command lands: the category and the index of the pattern
    /// that matched, or `None` for the default.
    fn landing(policy: &Policy, command: &str) -> (String, Option<usize>) {
        let decision = policy.decide(command, None);
        let index = match decision.source {
            DecisionSource::Pattern { index, .. } => Some(index),
            DecisionSource::Default => None,
            DecisionSource::Explicit => unreachable!("no explicit timeout was given"),
        };
        (decision.category.unwrap(), index)
    }

    fn check_landings(policy: &Policy, cases: &[(&str, &str, Option<usize>)]) {
        let mut failures = Vec::new();
        for &(command, category, index) in cases {
            let actual = landing(policy, command);
            if actual != (category.to_owned(), index) {
                failures.push(format!(
                    "{command:?}: expected {category} {index:?}, got {} {:?}",
                    actual.0, actual.1
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn seed_file_loads_unchanged() {
        let policy = seed();
        assert_eq!(policy.version(), Some("1.0"));
        assert_eq!(policy.description(), Some("Terminal command timeout policy"));
        let categories: Vec<_> = policy
            .categories()
            .iter()
            .map(|c| (c.name.as_str(), c.limits, c.description.as_deref()))
            .collect();
        assert_eq!(
            categories,
            [
                (
                    "quick",
                    limits(secs(30), secs(10)),
                    Some("Instant commands (ls, dir, echo, git status)")
                ),
                ("medium", limits(secs(120), secs(30)), Some("Scripts, tests, small compilations")),
                ("long", limits(secs(600), secs(60)), Some("Package install, builds, indexing")),
                (
                    "extended",
                    limits(secs(900), secs(120)),
                    Some("Training, large builds (use sparingly)")
                ),
            ]
        );
        assert_eq!(policy.default_category().name, "medium");
        let order: Vec<_> = policy.patterns().map(|p| (p.category, p.index)).collect();
        assert_eq!(order.len(), 12);
        assert_eq!(order[0], ("quick", 0));
        assert_eq!(order[3], ("medium", 0));
        assert_eq!(order[11], ("extended", 2));
        assert_eq!(
            policy.patterns().nth(1).unwrap().pattern,
            "^git (status|branch|log|diff)(?!.*push|pull|clone)"
        );
    }

    /// Each expectation was checked against Python's
    /// `re.match(pattern, command, re.IGNORECASE)` with the seed's loop.
    #[test]
    fn seed_commands_land_where_python_puts_them() {
        check_landings(
            &seed(),
            &[
                // The seed's own test commands.
                ("echo 'timeout test 1'", "quick", Some(0)),
                ("Start-Sleep -Seconds 600", "medium", None),
                ("npm install --dry-run", "long", Some(0)),
                ("git status", "quick", Some(1)),
                // The look-ahead is `(?!(.*push)|(pull)|(clone))`: a later
                // `push` anywhere vetoes, `pull` only right after the
                // subcommand does.
                ("git diff --stat push", "medium", None),
                ("git log --oneline pull", "quick", Some(1)),
                ("git diff pull", "quick", Some(1)),
                ("git diffpull", "medium", None),
                ("git push", "long", Some(1)),
                ("GIT PUSH origin", "long", Some(1)),
                // First match wins: `long` comes before `extended`.
                ("cargo build --release", "long", Some(0)),
                ("npm run build:prod", "extended", Some(2)),
                ("llamafactory-cli train cfg.yaml", "extended", Some(0)),
                ("pip install requests", "long", Some(2)),
                ("dotnet publish", "long", Some(0)),
                // The look-ahead only looks past `.py`.
                ("python train.py", "medium", Some(2)),
                ("python run.py --mode train", "medium", None),
                ("pwsh ./build.ps1", "medium", Some(0)),
                ("cargo test", "medium", Some(1)),
                ("cargo run check", "medium", Some(1)),
                ("cargo run", "medium", None),
                // Case-insensitive, anchored at the start only.
                ("LS -la", "quick", Some(0)),
                ("Git Status", "quick", Some(1)),
                ("echo ls", "quick", Some(0)),
                ("xls", "medium", None),
                ("   ls", "quick", Some(0)),
                ("\tpwd", "quick", Some(0)),
                ("catalog-builder", "quick", Some(0)),
                ("hostnamectl", "quick", Some(2)),
                ("whoami", "quick", Some(2)),
                ("unknown-tool", "medium", None),
                ("", "medium", None),
            ],
        );
    }

    #[test]
    fn decisions_carry_what_explain_needs() {
        let policy = seed();
        assert_eq!(
            policy.decide("git status", None),
            Decision {
                limits: limits(secs(30), secs(10)),
                category: Some("quick".to_owned()),
                source: DecisionSource::Pattern {
                    pattern: "^git (status|branch|log|diff)(?!.*push|pull|clone)".to_owned(),
                    index: 1,
                },
            }
        );
        assert_eq!(
            policy.decide("make", None),
            Decision {
                limits: limits(secs(120), secs(30)),
                category: Some("medium".to_owned()),
                source: DecisionSource::Default,
            }
        );
        assert_eq!(
            policy.decide("git status", Some(ExplicitTimeout::from_secs_f64(8.0).unwrap())),
            Decision {
                limits: limits(secs(8), secs(2)),
                category: None,
                source: DecisionSource::Explicit,
            }
        );
    }

    #[test]
    fn first_match_follows_file_order_not_name_order() {
        // Keys are neither sorted nor in `categories` order, so neither a
        // BTreeMap nor a lookup through `categories` would give this order.
        let json = r#"{
            "categories": {
                "alpha": {"exec_timeout_sec": 1, "no_output_timeout_sec": 1},
                "mid": {"exec_timeout_sec": 2, "no_output_timeout_sec": 2},
                "zeta": {"exec_timeout_sec": 3, "no_output_timeout_sec": 3}
            },
            "command_patterns": {
                "zeta": ["^make test", "^make"],
                "alpha": ["^make", "^ls"],
                "mid": ["^ls", "^cat"]
            },
            "default_category": "mid"
        }"#;
        let policy = Policy::from_json(json, "order.json").unwrap();
        check_landings(
            &policy,
            &[
                ("make test", "zeta", Some(0)),
                ("make", "zeta", Some(1)),
                ("ls", "alpha", Some(1)),
                ("cat", "mid", Some(1)),
                ("echo", "mid", None),
            ],
        );
        let names: Vec<_> = policy.categories().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mid", "zeta"]);
    }

    #[test]
    fn python_match_semantics() {
        let json = r#"{
            "categories": {
                "hit": {"exec_timeout_sec": 1, "no_output_timeout_sec": 1},
                "miss": {"exec_timeout_sec": 2, "no_output_timeout_sec": 2}
            },
            "command_patterns": {"hit": [
                "ls",
                "(?<=^)pwd(?=\\s|$)",
                "foo|bar",
                "(?P<tool>make) (?P=tool)",
                "Straße"
            ]},
            "default_category": "miss"
        }"#;
        let policy = Policy::from_json(json, "match.json").unwrap();
        check_landings(
            &policy,
            &[
                // Anchored at the start even without `^`, never at the end.
                ("ls", "hit", Some(0)),
                ("lsblk", "hit", Some(0)),
                ("xls", "miss", None),
                ("LS", "hit", Some(0)),
                // Look-behind and look-ahead work.
                ("pwd", "hit", Some(1)),
                ("pwd -P", "hit", Some(1)),
                ("pwdx", "miss", None),
                // The whole alternation is anchored, not just its first arm.
                ("bar", "hit", Some(2)),
                ("xbar", "miss", None),
                // Python's named groups and back-references.
                ("make make", "hit", Some(3)),
                ("make cmake", "miss", None),
                ("STRASSE", "miss", None),
                ("STRAẞE", "hit", Some(4)),
            ],
        );
    }

    #[test]
    fn explicit_timeout_limits() {
        let ms = Duration::from_millis;
        let cases = [
            (120.0, secs(120), secs(30)),
            (2.0, secs(2), secs(1)),
            (400.0, secs(400), secs(60)),
            (0.5, ms(500), ms(500)),
            (1.0, secs(1), secs(1)),
            (6.0, secs(6), ms(1500)),
            (240.0, secs(240), secs(60)),
            (3600.0, secs(3600), secs(60)),
        ];
        for (value, exec, no_output) in cases {
            let timeout = ExplicitTimeout::from_secs_f64(value).unwrap();
            assert_eq!(timeout.duration(), exec, "{value}");
            assert_eq!(timeout.limits(), limits(exec, no_output), "{value}");
        }
    }

    #[test]
    fn an_explicit_no_output_limit_replaces_the_derived_one() {
        let ms = Duration::from_millis;
        let policy = Policy::embedded();
        let eight = ExplicitTimeout::from_secs_f64(8.0).unwrap();
        let explicit = policy.decide("git status", Some(eight));
        assert_eq!(explicit.limits, limits(secs(8), secs(2)));
        let chosen = explicit.clone().with_no_output(eight);
        assert_eq!(chosen.limits, limits(secs(8), secs(8)));
        assert_eq!((&chosen.category, &chosen.source), (&explicit.category, &explicit.source));
        // Longer than the execution limit is allowed: the execution limit
        // then fires first.
        let long = ExplicitTimeout::from_secs_f64(100.0).unwrap();
        assert_eq!(explicit.clone().with_no_output(long).limits, limits(secs(8), secs(100)));
        // Without a timeout the category keeps its execution limit.
        let by_category = policy.decide("make", None);
        let quiet =
            by_category.clone().with_no_output(ExplicitTimeout::from_secs_f64(0.5).unwrap());
        assert_eq!(quiet.limits, limits(by_category.limits.exec, ms(500)));
        assert_eq!(quiet.source, by_category.source);
    }

    #[test]
    fn invalid_explicit_timeouts() {
        // The words are the server's (`render::invalid_timeout`, which
        // tests the sentences); here, which values are refused and why.
        let cases = [
            (-3.0, InvalidTimeout::NotPositive(-3.0)),
            (0.0, InvalidTimeout::NotPositive(0.0)),
            (-0.0, InvalidTimeout::NotPositive(-0.0)),
            (f64::INFINITY, InvalidTimeout::NotPositive(f64::INFINITY)),
            (1e-12, InvalidTimeout::NotPositive(1e-12)),
            (31_536_001.0, InvalidTimeout::TooLarge(31_536_001.0)),
            (1e30, InvalidTimeout::TooLarge(1e30)),
        ];
        for (value, refused) in cases {
            assert_eq!(ExplicitTimeout::try_from(value).unwrap_err(), refused, "{value}");
        }
        let nan = ExplicitTimeout::try_from(f64::NAN).unwrap_err();
        assert!(matches!(nan, InvalidTimeout::NotPositive(got) if got.is_nan()), "{nan:?}");
        assert!(ExplicitTimeout::from_secs_f64(31_536_000.0).is_ok());
    }

    /// A minimal valid policy with `$CATEGORY` and `$PATTERNS` to replace.
    fn with(category: &str, patterns: &str) -> String {
        format!(
            r#"{{
  "categories": {{
    "quick": {category},
    "medium": {{"exec_timeout_sec": 120, "no_output_timeout_sec": 30}}
  }},
  "command_patterns": {patterns},
  "default_category": "medium"
}}"#
        )
    }

    const GOOD_CATEGORY: &str = r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 10}"#;

    /// A category's optional `limits` (memory, tasks, CPU) apply to its
    /// `run` commands; a category without them, the seed's format, sets
    /// none.
    #[test]
    fn a_category_may_set_resource_limits() {
        let seed = Policy::from_json(SEED_JSON, "seed").expect("the seed's format still loads");
        assert!(seed.categories().iter().all(|c| c.resources == CategoryLimits::default()));
        assert!(
            Policy::embedded()
                .categories()
                .iter()
                .all(|c| c.resources == CategoryLimits::default())
        );
        let text = with(
            r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 10,
                "limits": {"memory_mib": 2048, "tasks": 512, "cpu": 1.5}}"#,
            r#"{"quick": ["^ls"]}"#,
        );
        let policy = Policy::from_json(&text, "p.json").expect("valid");
        let (category, limits) = policy.resources_for("ls -l");
        assert_eq!(category.name, "quick");
        assert_eq!(
            limits,
            CategoryLimits { memory_mib: Some(2048), tasks: Some(512), cpu: Some(1.5) }
        );
        // A compound command gets the limits of the category that decides.
        assert_eq!(policy.resources_for("ls && ls -a").1, limits);
        assert_eq!(policy.resources_for("cd x && ls").1, CategoryLimits::default());
        let (category, limits) = policy.resources_for("make");
        assert_eq!((category.name.as_str(), limits), ("medium", CategoryLimits::default()));
        let null = with(
            r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 10, "limits": null}"#,
            r#"{"quick": ["^ls"]}"#,
        );
        assert!(Policy::from_json(&null, "p.json").is_ok());
    }

    #[test]
    fn bad_resource_limits_are_named() {
        let cases = [
            (
                r#"{"memory_mib": 8}"#,
                "p.json: categories.quick.limits.memory_mib: must be a whole number of MiB from 16 \
                 to 1048576, got 8",
            ),
            (
                r#"{"tasks": 2.5}"#,
                "p.json: categories.quick.limits.tasks: must be a whole number of tasks from 8 to \
                 4194304, got 2.5",
            ),
            (
                r#"{"cpu": 0}"#,
                "p.json: categories.quick.limits.cpu: must be a number of CPUs from 0.01 to 4096, \
                 got 0",
            ),
            (
                r#"{"memory_mb": 64}"#,
                "p.json: categories.quick.limits.memory_mb: is not a limit: use memory_mib, tasks \
                 or cpu",
            ),
            (
                r#"{"tasks": "64"}"#,
                "p.json: categories.quick.limits.tasks: must be a number, not a string",
            ),
            (r#"[64]"#, "p.json: categories.quick.limits: must be an object, not an array"),
        ];
        for (limits, expected) in cases {
            let text = with(
                &format!(
                    r#"{{"exec_timeout_sec": 30, "no_output_timeout_sec": 10, "limits": {limits}}}"#
                ),
                r#"{"quick": ["^ls"]}"#,
            );
            let error = Policy::from_json(&text, "p.json").expect_err(limits);
            assert_eq!(error.to_string(), expected, "{limits}");
        }
    }

    #[test]
    fn validation_errors() {
        let good_patterns = r#"{"quick": ["^ls"]}"#;
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "p.json:1:0: invalid JSON: EOF while parsing a value"),
            (
                r#"{"categories": }"#.to_owned(),
                "p.json:1:16: invalid JSON: expected value",
            ),
            (
                format!("{} x", with(GOOD_CATEGORY, good_patterns)),
                "p.json:8:3: invalid JSON: trailing characters",
            ),
            ("[]".to_owned(), "p.json: top level: must be an object, not an array"),
            (
                r#"{"default_category": "medium"}"#.to_owned(),
                "p.json: categories: this required field is missing; add it",
            ),
            (
                r#"{"categories": {"medium": {"exec_timeout_sec": 1, "no_output_timeout_sec": 1}}}"#
                    .to_owned(),
                "p.json: default_category: this required field is missing; add it",
            ),
            (
                r#"{"categories": [], "default_category": "medium"}"#.to_owned(),
                "p.json: categories: must be an object, not an array",
            ),
            (
                with("30", good_patterns),
                "p.json: categories.quick: must be an object, not a number",
            ),
            (
                with(r#"{"no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: this required field is missing; add it",
            ),
            (
                with(r#"{"exec_timeout_sec": 30}"#, good_patterns),
                "p.json: categories.quick.no_output_timeout_sec: this required field is missing; add it",
            ),
            (
                with(r#"{"exec_timeout_sec": "30", "no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: must be a number of seconds, not a string",
            ),
            (
                with(r#"{"exec_timeout_sec": null, "no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: must be a number of seconds, not null",
            ),
            (
                with(r#"{"exec_timeout_sec": -5, "no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: must be a positive number of seconds, got -5",
            ),
            (
                with(r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 0}"#, good_patterns),
                "p.json: categories.quick.no_output_timeout_sec: must be a positive number of seconds, got 0",
            ),
            (
                with(r#"{"exec_timeout_sec": 1e9, "no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: must be at most 31536000 seconds (365 days), got 1000000000",
            ),
            (
                with(r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 10, "description": 7}"#, good_patterns),
                "p.json: categories.quick.description: must be a string, not a number",
            ),
            (
                with(r#"{"exec_timeout_sec": 30, "exec_timeout_sec": 40, "no_output_timeout_sec": 10}"#, good_patterns),
                "p.json: categories.quick.exec_timeout_sec: appears more than once; merge the entries into one",
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": ["^ls", "^(cat"]}"#),
                "p.json: command_patterns.quick[1]: is not a valid regular expression: Parsing error at position 5: Opening parenthesis without closing parenthesis",
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": ["a)|(b"]}"#),
                "p.json: command_patterns.quick[0]: is not a valid regular expression: Parsing error at position 1: General parsing error: end of string not reached",
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": ["x{99999999999}"]}"#),
                "p.json: command_patterns.quick[0]: is not a valid regular expression: Error compiling regex: decimal literal invalid",
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": ["^ls", 5]}"#),
                "p.json: command_patterns.quick[1]: must be a string, not a number",
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": "^ls"}"#),
                "p.json: command_patterns.quick: must be a list of regular expressions, not a string",
            ),
            (
                with(GOOD_CATEGORY, r#"["^ls"]"#),
                "p.json: command_patterns: must be an object, not an array",
            ),
            (
                with(GOOD_CATEGORY, r#"{"fast": ["^ls"]}"#),
                r#"p.json: command_patterns.fast: there is no category "fast" in `categories` (it defines quick, medium); fix the name or add the category"#,
            ),
            (
                with(GOOD_CATEGORY, r#"{"quick": ["^ls"], "quick": ["^cat"]}"#),
                "p.json: command_patterns.quick: appears more than once; merge the entries into one",
            ),
            (
                r#"{"categories": {}, "default_category": "medium"}"#.to_owned(),
                r#"p.json: default_category: there is no category "medium" in `categories` (it defines none); fix the name or add the category"#,
            ),
            (
                with(GOOD_CATEGORY, good_patterns).replace(r#""default_category": "medium""#, r#""default_category": "slow""#),
                r#"p.json: default_category: there is no category "slow" in `categories` (it defines quick, medium); fix the name or add the category"#,
            ),
            (
                with(GOOD_CATEGORY, good_patterns).replace(r#""default_category": "medium""#, r#""default_category": ["medium"]"#),
                "p.json: default_category: must be a string, not an array",
            ),
            (
                with(GOOD_CATEGORY, good_patterns).replacen('{', r#"{"version": true, "#, 1),
                "p.json: version: must be a string, not a boolean",
            ),
            (
                with(GOOD_CATEGORY, good_patterns).replacen('{', r#"{"description": {}, "#, 1),
                "p.json: description: must be a string, not an object",
            ),
        ];
        let mut failures = Vec::new();
        for (json, expected) in &cases {
            match Policy::from_json(json, "p.json") {
                Ok(_) => failures.push(format!("loaded, expected {expected:?}:\n{json}")),
                Err(error) if error.to_string() != *expected => failures
                    .push(format!("expected {expected:?}\n     got {:?}", error.to_string())),
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn lenient_where_the_format_allows() {
        let cases = [
            // Unknown keys at every level are left for other tools.
            with(
                r#"{"exec_timeout_sec": 30, "no_output_timeout_sec": 10, "color": "green"}"#,
                r#"{"quick": ["^ls"]}"#,
            )
            .replacen('{', r#"{"x-editor": {"tab": 2}, "#, 1),
            // Fractional seconds, so tests can scale limits down.
            with(
                r#"{"exec_timeout_sec": 0.5, "no_output_timeout_sec": 0.25}"#,
                r#"{"quick": ["^ls"]}"#,
            ),
            // No patterns at all, or none for a category.
            with(GOOD_CATEGORY, "{}"),
            with(GOOD_CATEGORY, "null"),
            with(GOOD_CATEGORY, r#"{"quick": []}"#),
            // A numeric version, null optional fields, a byte-order mark.
            with(GOOD_CATEGORY, r#"{"quick": ["^ls"]}"#).replacen(
                '{',
                r#"{"version": 1.0, "description": null, "#,
                1,
            ),
            format!("\u{feff}{}", with(GOOD_CATEGORY, r#"{"quick": ["^ls"]}"#)),
        ];
        for json in cases {
            if let Err(error) = Policy::from_json(&json, "p.json") {
                panic!("{error}\n{json}");
            }
        }
        let policy = Policy::from_json(
            &with(
                r#"{"exec_timeout_sec": 0.5, "no_output_timeout_sec": 0.25}"#,
                r#"{"quick": ["^ls"]}"#,
            ),
            "p.json",
        )
        .unwrap();
        assert_eq!(
            policy.category("quick").unwrap().limits,
            limits(Duration::from_millis(500), Duration::from_millis(250))
        );
        assert_eq!(policy.category("slow"), None);
    }

    #[test]
    fn embedded_policy_compiles() {
        let policy = Policy::embedded();
        assert_eq!(policy.default_category().name, "medium");
        let categories: Vec<_> = policy
            .categories()
            .iter()
            .map(|c| (c.name.as_str(), c.limits, c.description.is_some()))
            .collect();
        assert_eq!(
            categories,
            [
                ("quick", limits(secs(30), secs(10)), true),
                ("medium", limits(secs(120), secs(30)), true),
                ("long", limits(secs(600), secs(60)), true),
                ("extended", limits(secs(900), secs(120)), true),
            ]
        );
    }

    /// The seed's patterns outside `quick` come first in their lists,
    /// verbatim; `quick` keeps the seed's commands behind a stricter ending.
    #[test]
    fn embedded_policy_keeps_the_seed_patterns_first() {
        let seed = seed();
        let embedded = Policy::embedded();
        for category in ["medium", "long", "extended"] {
            let from_seed: Vec<_> =
                seed.patterns().filter(|p| p.category == category).map(|p| p.pattern).collect();
            let from_embedded: Vec<_> = embedded
                .patterns()
                .filter(|p| p.category == category)
                .map(|p| p.pattern)
                .take(from_seed.len())
                .collect();
            assert_eq!(from_embedded, from_seed, "{category}");
        }
    }

    #[test]
    fn embedded_policy_classifies_common_commands() {
        check_landings(
            &Policy::embedded(),
            &[
                // The seed's examples, where the embedded policy agrees.
                ("echo 'timeout test 1'", "quick", Some(0)),
                ("git status", "quick", Some(1)),
                ("git push", "long", Some(1)),
                ("npm install --dry-run", "long", Some(0)),
                ("npm run build:prod", "extended", Some(2)),
                ("llamafactory-cli train cfg.yaml", "extended", Some(0)),
                ("pip install requests", "long", Some(2)),
                ("pwsh ./build.ps1", "medium", Some(0)),
                ("cargo test", "medium", Some(1)),
                ("whoami", "quick", Some(2)),
                ("LS -la", "quick", Some(0)),
                ("echo ls", "quick", Some(0)),
                ("xls", "medium", None),
                // Where it deliberately differs (see the module docs).
                ("cargo build --release", "extended", Some(1)),
                ("cargo build -p engine --release", "extended", Some(3)),
                ("python train.py", "extended", Some(4)),
                ("catalog-builder", "medium", None),
                ("hostnamectl", "medium", None),
                // Compound commands: each part is matched, and the part
                // with the longest limits decides.
                ("git log --oneline | git pull", "long", Some(1)),
                ("git diff && git push", "long", Some(1)),
                ("cd repo && cargo build", "long", Some(0)),
                ("ls | wc -l", "quick", Some(0)),
                ("echo $(cargo build)", "long", Some(0)),
                ("echo `make`", "medium", None),
                ("ls\ncargo build", "long", Some(0)),
                // Quick.
                ("cd /tmp", "quick", Some(3)),
                ("cd", "quick", Some(3)),
                ("pwd", "quick", Some(0)),
                ("cat README.md", "quick", Some(0)),
                ("cat > out.txt", "quick", Some(0)),
                ("head -n 5 file", "quick", Some(3)),
                ("tail -f log", "quick", Some(3)),
                ("wc -l src/main.rs", "quick", Some(3)),
                ("which cargo", "quick", Some(3)),
                ("command -v cargo", "quick", Some(3)),
                ("type ls", "quick", Some(0)),
                ("printenv PATH", "quick", Some(3)),
                ("id -u", "quick", Some(3)),
                ("uname -a", "quick", Some(3)),
                ("true", "quick", Some(3)),
                ("false", "quick", Some(3)),
                ("test -f Cargo.toml", "quick", Some(3)),
                ("[ -d .git ]", "quick", Some(3)),
                ("mkdir -p build", "quick", Some(3)),
                ("env", "quick", Some(4)),
                ("git branch -a", "quick", Some(1)),
                ("git log --oneline -5", "quick", Some(1)),
                ("git diff --stat", "quick", Some(1)),
                ("git show HEAD", "quick", Some(5)),
                ("git rev-parse HEAD", "quick", Some(5)),
                ("git remote -v", "quick", Some(6)),
                ("git remote", "quick", Some(6)),
                ("date +%s", "quick", Some(2)),
                // Not quick: the name continues, or the command runs others.
                ("env FOO=1 cargo build", "long", Some(0)),
                ("cat-file", "medium", None),
                ("lsblk", "medium", None),
                ("testrunner", "medium", None),
                ("git remote update", "medium", None),
                ("git statuses", "medium", None),
                // Medium.
                ("make", "medium", Some(12)),
                ("make test", "medium", Some(12)),
                ("make check", "medium", Some(12)),
                ("cargo check", "medium", Some(3)),
                ("cargo clippy --all-targets", "medium", Some(3)),
                ("cargo fmt --all", "medium", Some(3)),
                ("cargo run -- --help", "medium", Some(3)),
                ("go test ./...", "medium", Some(4)),
                ("go vet ./...", "medium", Some(4)),
                ("pytest -x", "medium", Some(5)),
                ("python -m pytest tests", "medium", Some(6)),
                ("python3 -m pytest", "medium", Some(6)),
                ("python3 script.py", "medium", Some(7)),
                ("python script.py", "medium", Some(2)),
                ("npm test", "medium", Some(1)),
                ("npm run lint", "medium", Some(8)),
                ("npm run build", "medium", Some(8)),
                ("node index.js", "medium", Some(9)),
                ("bash script.sh", "medium", Some(10)),
                ("sh -c 'echo hi'", "medium", Some(10)),
                (". ./env.sh", "medium", Some(10)),
                ("./run-tests", "medium", Some(11)),
                ("../bin/tool --flag", "medium", Some(11)),
                ("cmake -S . -B build", "medium", Some(13)),
                ("grep -rn TODO src", "medium", Some(14)),
                ("rg TODO", "medium", Some(14)),
                ("find . -name '*.rs'", "medium", Some(14)),
                // Long.
                ("cargo build", "long", Some(0)),
                ("cargo install ripgrep", "long", Some(0)),
                ("cargo b", "long", Some(17)),
                ("go build ./...", "long", Some(18)),
                ("go mod download", "long", Some(18)),
                ("npm ci", "long", Some(3)),
                ("npm i left-pad", "long", Some(3)),
                ("yarn install", "long", Some(3)),
                ("yarn", "long", Some(4)),
                ("pnpm install", "long", Some(3)),
                ("pip3 install -r requirements.txt", "long", Some(5)),
                ("python -m pip install requests", "long", Some(5)),
                ("uv pip install requests", "long", Some(5)),
                ("uv sync", "long", Some(6)),
                ("apt-get update", "long", Some(10)),
                ("sudo apt-get install -y jq", "long", Some(10)),
                ("apt install jq", "long", Some(10)),
                ("docker build -t app .", "long", Some(14)),
                ("docker pull ubuntu", "long", Some(14)),
                ("git clone https://example.com/repo", "long", Some(1)),
                ("git pull --rebase", "long", Some(1)),
                ("git fetch origin", "long", Some(1)),
                ("make -j8", "long", Some(19)),
                ("make -C build --jobs=4 all", "long", Some(19)),
                ("cmake --build build", "long", Some(20)),
                ("mvn package", "long", Some(21)),
                ("./gradlew build", "long", Some(21)),
                ("gradle test", "long", Some(21)),
                ("tox -e py312", "long", Some(9)),
            ],
        );
    }

    /// Where a command lands and which part decided: the category and
    /// the winning part's text (the whole command when it is matched whole).
    fn deciding_part<'c>(policy: &Policy, command: &'c str) -> (String, &'c str) {
        let explanation = policy.explain(command, None);
        let part = explanation.winner.map_or(command, |index| explanation.parts[index].text);
        (explanation.decision.category.unwrap(), part)
    }

    fn check_parts(policy: &Policy, cases: &[(&str, &str, &str)]) {
        let mut failures = Vec::new();
        for &(command, category, part) in cases {
            let actual = deciding_part(policy, command);
            if actual != (category.to_owned(), part) {
                failures.push(format!(
                    "{command:?}: expected {category} by {part:?}, got {} by {:?}",
                    actual.0, actual.1
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    /// Issue 14: the part with the longest limits decides, wherever it is.
    #[test]
    fn compound_commands_get_the_limits_of_their_work() {
        check_parts(
            &Policy::embedded(),
            &[
                ("cd demo && cargo build --release", "extended", "cargo build --release"),
                (
                    "cd /tmp && sleep 0 && cargo build --release",
                    "extended",
                    "cargo build --release",
                ),
                ("cargo build --release && cd demo", "extended", "cargo build --release"),
                ("make || cargo build", "long", "cargo build"),
                ("ls; npm ci; ls", "long", "npm ci"),
                ("cat data | python train.py", "extended", "python train.py"),
                ("python3 -m http.server & sleep 1", "medium", "python3 -m http.server"),
                ("ls\npip install requests", "long", "pip install requests"),
                ("(cd demo && cargo build --release)", "extended", "cargo build --release"),
                ("{ cd demo; make -j8; }", "long", "make -j8"),
                ("echo $(go build ./...)", "long", "go build ./..."),
                ("echo \"built: $(cargo build --release)\"", "extended", "cargo build --release"),
                ("echo `npm install`", "long", "npm install"),
                ("diff <(cargo build) b", "long", "cargo build"),
                (
                    "if make; then cargo build --release; fi",
                    "extended",
                    "then cargo build --release",
                ),
                ("for f in *; do pip install $f; done", "long", "do pip install $f"),
                ("while true; do npm ci; done", "long", "do npm ci"),
                // What agents type in a day of work.
                (
                    "cd frontend && npm install && cd .. && cargo build --release",
                    "extended",
                    "cargo build --release",
                ),
                (
                    "python -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt",
                    "long",
                    "pip install -r requirements.txt",
                ),
                ("source .venv/bin/activate && pytest -x", "medium", "source .venv/bin/activate"),
                ("git add -A && git commit -m 'wip' && git push", "long", "git push"),
                ("export RUST_LOG=debug; cargo test 2>&1 | tail -50", "medium", "cargo test 2>&1"),
                ("make -j$(nproc) && sudo make install", "long", "make -j$(nproc)"),
                (
                    "sudo apt-get update && sudo apt-get install -y jq",
                    "long",
                    "sudo apt-get update",
                ),
                ("docker compose build && docker compose up -d", "long", "docker compose build"),
                ("timeout 300 pytest -q || cat log", "medium", "timeout 300 pytest -q"),
                // Quick only when every part is.
                ("cd /tmp && ls", "quick", "cd /tmp"),
                ("git status && git diff", "quick", "git status"),
                ("[[ -f x || -d y ]] && ls", "quick", "ls"),
                (
                    "case $1 in (release) cargo build --release;; *) make;; esac",
                    "extended",
                    "case $1 in (release) cargo build --release",
                ),
                ("case $1 in -h|--help) echo usage;; *) npm ci;; esac", "long", "npm ci"),
                ("time (make -j8 && make test)", "long", "make -j8"),
                ("git commit -m \"fix: a && b\" && git push", "long", "git push"),
                ("cd /tmp && ./configure", "medium", "./configure"),
                ("cd /tmp && unknown-tool", "medium", "unknown-tool"),
                // Quotes, escapes, comments and here-documents hold no parts.
                (
                    "echo 'a && cargo build --release'",
                    "medium",
                    "echo 'a && cargo build --release'",
                ),
                ("echo a \\&\\& cargo build", "medium", "echo a \\&\\& cargo build"),
                ("ls # && cargo build --release", "quick", "ls"),
                ("cat <<EOF\ncargo build --release\nEOF", "quick", "cat <<EOF"),
                // Nothing that runs a command: matched whole, as before.
                ("X=1", "medium", "X=1"),
                ("", "medium", ""),
                ("fi; done", "medium", "fi; done"),
            ],
        );
    }

    #[test]
    fn prefixes_are_looked_through() {
        check_parts(
            &Policy::embedded(),
            &[
                ("env FOO=1 cargo build --release", "extended", "env FOO=1 cargo build --release"),
                ("FOO=1 BAR='a b' cargo build", "long", "FOO=1 BAR='a b' cargo build"),
                (
                    "sudo -u builder -E cargo build --release",
                    "extended",
                    "sudo -u builder -E cargo build --release",
                ),
                ("sudo apt-get install -y jq", "long", "sudo apt-get install -y jq"),
                ("time cargo build", "long", "time cargo build"),
                ("time -p make -j4", "long", "time -p make -j4"),
                (
                    "/usr/bin/time -v -o t.txt make -j4",
                    "long",
                    "/usr/bin/time -v -o t.txt make -j4",
                ),
                ("nice -n 10 make -j4", "long", "nice -n 10 make -j4"),
                ("nice -5 cargo build", "long", "nice -5 cargo build"),
                (
                    "timeout 600 cargo build --release",
                    "extended",
                    "timeout 600 cargo build --release",
                ),
                (
                    "timeout -k 5 --signal=INT 10m npm ci",
                    "long",
                    "timeout -k 5 --signal=INT 10m npm ci",
                ),
                ("nohup python train.py", "extended", "nohup python train.py"),
                (
                    "ionice -c3 nice stdbuf -oL make -j2",
                    "long",
                    "ionice -c3 nice stdbuf -oL make -j2",
                ),
                (
                    "/usr/bin/env -i PATH=/bin make -j2",
                    "long",
                    "/usr/bin/env -i PATH=/bin make -j2",
                ),
                ("exec -a builder cargo build", "long", "exec -a builder cargo build"),
                ("command cargo build", "long", "command cargo build"),
                ("doas -u root apt install jq", "long", "doas -u root apt install jq"),
                ("> build.log 2>&1 cargo build", "long", "> build.log 2>&1 cargo build"),
                ("sudo -- make -j8", "long", "sudo -- make -j8"),
                // Written forms a pattern matches are not looked through.
                ("command -v cargo", "quick", "command -v cargo"),
                ("env", "quick", "env"),
                // Options with which a prefix runs no command stop there.
                ("sudo -l cargo build", "medium", "sudo -l cargo build"),
                ("ionice -p 42 make -j4", "medium", "ionice -p 42 make -j4"),
                ("env -S 'make -j4'", "medium", "env -S 'make -j4'"),
                // Not a prefix, or nothing after it.
                ("sudo", "medium", "sudo"),
                ("timeout 5", "medium", "timeout 5"),
                ("xargs make -j4", "medium", "xargs make -j4"),
                ("envy cargo build", "medium", "envy cargo build"),
            ],
        );
        // Each part looks through its own prefixes.
        check_parts(
            &Policy::embedded(),
            &[(
                "cd x && sudo -E env A=1 nice cargo build --release | tee log",
                "extended",
                "sudo -E env A=1 nice cargo build --release",
            )],
        );
    }

    /// A shell's command string is a command of its own when its text is
    /// the command as written.
    #[test]
    fn shell_command_strings_are_looked_into() {
        check_parts(
            &Policy::embedded(),
            &[
                ("bash -c 'cd demo && cargo build --release'", "extended", "cargo build --release"),
                ("sh -ec \"make -j8\"", "long", "make -j8"),
                ("bash -lc 'npm ci'", "long", "npm ci"),
                ("sudo sh -c 'apt-get update && apt-get install -y jq'", "long", "apt-get update"),
                ("eval 'pip install requests'", "long", "pip install requests"),
                ("/bin/bash -o pipefail -c 'make -j4 | tee log'", "long", "make -j4"),
                ("bash -c \"bash -c 'npm ci'\"", "long", "npm ci"),
                ("cd x && bash -c make", "medium", "bash -c make"),
                // Not a command string as written: not looked into.
                (
                    "bash -c \"cargo build \\\"--release\\\"\"",
                    "medium",
                    "bash -c \"cargo build \\\"--release\\\"\"",
                ),
                ("bash script.sh 'npm ci'", "medium", "bash script.sh 'npm ci'"),
                ("eval 'npm' ci", "medium", "eval 'npm' ci"),
                ("bash -c", "medium", "bash -c"),
                ("echo bash -c 'npm ci'", "quick", "echo bash -c 'npm ci'"),
            ],
        );
        // Quoting without escapes nests three strings at most: each is looked into.
        check_parts(&Policy::embedded(), &[("eval \"eval 'eval yarn'\"", "long", "yarn")]);
    }

    #[test]
    fn explain_lists_each_part_and_what_it_matched() {
        let policy = Policy::embedded();
        let explanation = policy.explain("cd demo && FOO=1 cargo build --release; ls", None);
        let parts: Vec<_> = explanation
            .parts
            .iter()
            .map(|p| (p.text, p.command, p.decision.category.as_deref().unwrap()))
            .collect();
        assert_eq!(
            parts,
            [
                ("cd demo", "cd demo", "quick"),
                ("FOO=1 cargo build --release", "cargo build --release", "extended"),
                ("ls", "ls", "quick"),
            ]
        );
        assert_eq!(explanation.winner, Some(1));
        assert_eq!(
            explanation.decision,
            Decision {
                limits: limits(secs(900), secs(120)),
                category: Some("extended".to_owned()),
                source: DecisionSource::Pattern {
                    pattern: "cargo build --release".to_owned(),
                    index: 1
                },
            }
        );
        assert_eq!(
            policy.decide("cd demo && FOO=1 cargo build --release; ls", None),
            explanation.decision
        );
        // An unmatched part names its command without the reserved words.
        let explanation = policy.explain("if frobnicate; then ls; fi", None);
        let parts: Vec<_> = explanation.parts.iter().map(|p| (p.text, p.command)).collect();
        assert_eq!(parts, [("if frobnicate", "frobnicate"), ("then ls", "ls")]);
        assert_eq!(explanation.decision.source, DecisionSource::Default);
        // An explicit timeout needs no parts.
        let explicit =
            policy.explain("cd x && make", Some(ExplicitTimeout::from_secs_f64(5.0).unwrap()));
        assert_eq!((explicit.parts.len(), explicit.winner), (0, None));
        assert_eq!(explicit.decision.source, DecisionSource::Explicit);
    }

    /// "Longest" is the larger execution limit, then the larger no-output
    /// limit; on a tie the first part decides. A part no pattern matches
    /// gets the default category, which can be the longest.
    #[test]
    fn the_longest_limits_win() {
        let json = r#"{
            "categories": {
                "short_quiet": {"exec_timeout_sec": 10, "no_output_timeout_sec": 5},
                "short_patient": {"exec_timeout_sec": 10, "no_output_timeout_sec": 8},
                "long_quiet": {"exec_timeout_sec": 20, "no_output_timeout_sec": 1},
                "tiny": {"exec_timeout_sec": 1, "no_output_timeout_sec": 1},
                "fallback": {"exec_timeout_sec": 60, "no_output_timeout_sec": 30}
            },
            "command_patterns": {
                "short_quiet": ["^a\\b"],
                "short_patient": ["^b\\b"],
                "long_quiet": ["^c\\b"],
                "tiny": ["^sleep "]
            },
            "default_category": "fallback"
        }"#;
        let policy = Policy::from_json(json, "longest.json").unwrap();
        check_parts(
            &policy,
            &[
                ("a; b", "short_patient", "b"),
                ("b; a", "short_patient", "b"),
                ("a; b; c", "long_quiet", "c"),
                ("a 1; a 2", "short_quiet", "a 1"),
                ("sleep 1 && sleep 2", "tiny", "sleep 1"),
                ("sleep 1 && other", "fallback", "other"),
                ("c | d", "fallback", "d"),
            ],
        );
    }

    /// Hostile commands cost a linear scan and a bounded number of
    /// matches, and never panic.
    #[test]
    fn hostile_commands_are_bounded() {
        let policy = Policy::embedded();
        let semicolons = ";".repeat(1 << 20);
        assert_eq!(policy.decide(&semicolons, None).category.as_deref(), Some("medium"));
        let parens = "(".repeat(1 << 20);
        let _ = policy.decide(&parens, None);
        let subshells = format!("{}cargo build --release{}", "( ".repeat(5000), " )".repeat(5000));
        let _ = policy.decide(&subshells, None);
        // Many distinct parts: the first MAX_PARTS are matched, the rest counted.
        let mut many: String = (0..10_000).map(|i| format!("tool{i}; ")).collect();
        many.insert_str(0, "cargo build --release; ");
        let explanation = policy.explain(&many, None);
        assert_eq!(explanation.parts.len(), syntax::MAX_PARTS);
        assert_eq!(explanation.omitted, 10_001 - syntax::MAX_PARTS);
        assert_eq!(explanation.decision.category.as_deref(), Some("extended"));
        // Prefixes are looked through a bounded number of times.
        let wrapped = format!("{}cargo build --release", "nice ".repeat(100));
        assert_eq!(policy.decide(&wrapped, None).category.as_deref(), Some("medium"));
        let wrapped = format!("{}cargo build --release", "nice ".repeat(MAX_LOOKS - 1));
        assert_eq!(policy.decide(&wrapped, None).category.as_deref(), Some("extended"));
        // Random bytes and shell soup.
        const ALPHABET: &[u8] = b"()`'\"$\\{};&|<>#=-\n\t sudo env make cargo build --release";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000 {
            let len = (next() % 300) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if round % 4 == 0 { r as u8 } else { ALPHABET[(r as usize) % ALPHABET.len()] }
                })
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            let explanation = policy.explain(&text, None);
            assert!(explanation.parts.len() <= syntax::MAX_PARTS);
            assert_eq!(explanation.winner.is_some(), !explanation.parts.is_empty());
            for part in &explanation.parts {
                assert!(part.text.contains(part.command), "{text:?}: {part:?}");
            }
        }
    }

    /// A directory under the system temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let path = std::env::temp_dir()
                .join(format!("shellkeep-policy-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        fn write(&self, relative: &str, text: &str) -> PathBuf {
            let path = self.0.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn locate_order_and_fallbacks() {
        let tmp = TempDir::new("locate");
        let root = tmp.0.clone();
        let flag = tmp.write("flag.json", SEED_JSON);
        let env = tmp.write("env.json", SEED_JSON);
        let cwd_with = root.join("cwd-with");
        let in_cwd = tmp.write("cwd-with/config/terminal_timeout_policy.json", SEED_JSON);
        let cwd_without = root.join("cwd-without");
        std::fs::create_dir_all(&cwd_without).unwrap();
        let home_with = root.join("home-with");
        let in_home = tmp.write("home-with/shellkeep/policy.json", SEED_JSON);
        let home_without = root.join("home-without");
        let missing = root.join("missing.json");

        use LocationSource::*;
        let file = |path: &Path, source| Location::File { path: path.to_owned(), source };
        let gone = |path: &Path, source| Location::Missing { path: path.to_owned(), source };
        // (flag, environment variable, working directory, config home, result)
        type Case<'a> = (Option<&'a Path>, Option<&'a OsStr>, &'a Path, Option<&'a Path>, Location);
        let cases: Vec<Case<'_>> = vec![
            // The flag beats everything.
            (Some(&flag), Some(env.as_os_str()), &cwd_with, Some(&home_with), file(&flag, Flag)),
            // A missing flag file is reported, not skipped.
            (
                Some(&missing),
                Some(env.as_os_str()),
                &cwd_with,
                Some(&home_with),
                gone(&missing, Flag),
            ),
            // Relative paths are taken against the working directory.
            (Some(Path::new("flag.json")), None, &root, None, file(&flag, Flag)),
            (None, Some(env.as_os_str()), &cwd_with, Some(&home_with), file(&env, Environment)),
            (
                None,
                Some(missing.as_os_str()),
                &cwd_with,
                Some(&home_with),
                gone(&missing, Environment),
            ),
            (None, Some(OsStr::new("env.json")), &root, None, file(&env, Environment)),
            // An empty variable counts as unset.
            (
                None,
                Some(OsStr::new("")),
                &cwd_with,
                Some(&home_with),
                file(&in_cwd, WorkingDirectory),
            ),
            (None, None, &cwd_with, Some(&home_with), file(&in_cwd, WorkingDirectory)),
            (None, None, &cwd_without, Some(&home_with), file(&in_home, ConfigDirectory)),
            (None, None, &cwd_without, Some(&home_without), Location::Embedded),
            (None, None, &cwd_without, None, Location::Embedded),
        ];
        for (index, (flag, env, cwd, config_home, expected)) in cases.into_iter().enumerate() {
            assert_eq!(locate(flag, env, cwd, config_home), expected, "case {index}");
        }
    }

    #[test]
    fn config_home_follows_xdg() {
        let cases = [
            (Some("/xdg"), Some("/home/u"), Some("/xdg")),
            (None, Some("/home/u"), Some("/home/u/.config")),
            (Some(""), Some("/home/u"), Some("/home/u/.config")),
            (Some("relative"), Some("/home/u"), Some("/home/u/.config")),
            (None, Some(""), None),
            (None, None, None),
        ];
        for (xdg, home, expected) in cases {
            assert_eq!(
                config_home(xdg.map(OsStr::new), home.map(OsStr::new)),
                expected.map(PathBuf::from),
                "{xdg:?} {home:?}"
            );
        }
    }

    #[test]
    fn load_policy_outcomes() {
        let tmp = TempDir::new("load");
        let good = tmp.write("good.json", SEED_JSON);
        let bad = tmp.write("bad.json", r#"{"categories": {}, "default_category": "x"}"#);
        let missing = tmp.0.join("missing.json");

        let loaded =
            load_policy(&Location::File { path: good.clone(), source: LocationSource::Flag })
                .unwrap();
        assert_eq!(loaded.origin, good.display().to_string());
        assert_eq!(loaded.notice, None);
        assert_eq!(loaded.policy.patterns().count(), 12);

        for (source, by) in
            [(LocationSource::Flag, "--policy"), (LocationSource::Environment, "SHELLKEEP_POLICY")]
        {
            let loaded = load_policy(&Location::Missing { path: missing.clone(), source }).unwrap();
            assert_eq!(loaded.origin, "embedded default");
            assert_eq!(
                loaded.notice.unwrap(),
                format!(
                    "policy file {} (named by {by}) not found; using the embedded default policy",
                    missing.display()
                )
            );
        }

        let loaded = load_policy(&Location::Embedded).unwrap();
        assert_eq!((loaded.origin.as_str(), loaded.notice), ("embedded default", None));

        let error = load_policy(&Location::File {
            path: bad.clone(),
            source: LocationSource::WorkingDirectory,
        })
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                r#"{}: default_category: there is no category "x" in `categories` (it defines none); fix the name or add the category"#,
                bad.display()
            )
        );

        // A directory where a file should be: it exists, so it is an error.
        let error =
            load_policy(&Location::File { path: tmp.0.clone(), source: LocationSource::Flag })
                .unwrap_err();
        let prefix = format!("{}: cannot read the policy file: ", tmp.0.display());
        assert!(error.to_string().starts_with(&prefix), "{error}");
    }
}
