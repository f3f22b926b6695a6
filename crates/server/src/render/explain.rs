//! Words a timeout policy explanation (`policy_explain`, `shellkeep policy
//! explain`): the category and limits a command gets, the part of a
//! compound command that decided them, and the parts considered (a bounded
//! list). It does not decide anything: the engine's `Policy::explain` does.

use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::CategoryLimits;
use shellkeep_engine::MAX_PARTS;
use shellkeep_engine::{Decision, DecisionSource, Explanation};
use shellkeep_engine::{MASK, Secrets};

use rmcp::schemars;

use super::{echo, head_and_tail, is_zero, mask, round_secs, seconds};

/// The most parts an explanation lists, in its text and its structured
/// content; it counts the rest.
pub(super) const LISTED_PARTS: usize = 20;

/// Structured result of `policy_explain`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ExplainOutput {
    /// The category, or null when an explicit timeout decides.
    pub category: Option<String>,
    /// `explicit`, `pattern` or `default`.
    pub source: &'static str,
    /// The pattern that matched, for `pattern`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The execution limit, in seconds.
    pub exec_timeout_sec: f64,
    /// The no-output limit, in seconds.
    pub no_output_timeout_sec: f64,
    /// Where the policy came from.
    pub policy: String,
    /// The part of the command whose limits apply (the part with the
    /// longest limits), as written; absent for an explicit timeout or a
    /// command matched whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The parts considered, in the order they start (at most 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ExplainPart>,
    /// Parts left out of `parts`: listed beyond 20, or past the 256th
    /// and not matched at all.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_parts: usize,
    /// The resource limits the policy's category sets for the command as a
    /// `run` command, in place of the server's; absent when it sets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_limits: Option<RunLimitsOutput>,
}

/// A category's resource limits in an explanation.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunLimitsOutput {
    /// The category that sets them (the one its patterns choose, whatever
    /// the timeout).
    pub category: String,
    /// Memory in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// Tasks (processes and threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
    /// CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
}

/// Adds to an explanation the resource limits `category` sets for `run`
/// commands (`limits`), when it sets any: a line of text and a field.
pub(crate) fn add_run_limits(
    text: &mut String,
    output: &mut ExplainOutput,
    category: &str,
    limits: &CategoryLimits,
) {
    let mut named = Vec::new();
    if let Some(mib) = limits.memory_mib {
        named.push(format!("memory {mib} MiB"));
    }
    if let Some(tasks) = limits.tasks {
        named.push(format!("tasks {tasks}"));
    }
    if let Some(cpu) = limits.cpu {
        named.push(format!("cpu {cpu}"));
    }
    if named.is_empty() {
        return;
    }
    text.push_str(&format!(
        "\nAs a run command it gets the resource limits of its category {category}: {} (the \
         server's for the rest).",
        named.join(", ")
    ));
    output.run_limits = Some(RunLimitsOutput {
        category: category.to_owned(),
        memory_mib: limits.memory_mib,
        tasks: limits.tasks,
        cpu: limits.cpu,
    });
}

/// One part of a command in an explanation.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ExplainPart {
    /// The part as written (cut to about 200 characters).
    pub text: String,
    /// What the pattern was matched against, when it differs from the
    /// text: the part's command after reserved words and prefixes (`sudo`,
    /// `env X=1`, `time`) were looked through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_text: Option<String>,
    /// The category the part alone would get.
    pub category: Option<String>,
    /// The pattern that matched it; absent for the default category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// The masker of the parts an explanation names (see [`explain`]): each
/// part masked as output is ([`mask`]), and shown only as it appears in
/// `named`, the masked command. A separator can split a secret (`echo
/// pa55;w0rd`) so that a part's own masking cannot see it: when the
/// command had something masked, a part its masked form is not in shows as
/// the mask alone.
pub(crate) fn part_masker<'a>(
    masks: &'a Secrets,
    named: &'a str,
    masked_any: bool,
) -> impl Fn(&str) -> String + 'a {
    move |text: &str| {
        let masked = mask(masks, text);
        if masked_any && !named.contains(masked.as_str()) {
            return MASK.to_owned();
        }
        masked
    }
}

/// The structured result and text of a policy explanation. `command` is
/// masked already; `mask` masks the parts' texts, taken from the command
/// as it was given.
pub(crate) fn explain(
    command: &str,
    explanation: &Explanation<'_>,
    origin: &str,
    mask: &dyn Fn(&str) -> String,
) -> (String, ExplainOutput) {
    let decision = &explanation.decision;
    let (source, pattern) = match &decision.source {
        DecisionSource::Explicit => ("explicit", None),
        DecisionSource::Pattern { pattern, .. } => ("pattern", Some(pattern.clone())),
        DecisionSource::Default => ("default", None),
    };
    let winner = explanation.winner.map(|index| &explanation.parts[index]);
    // A command that is one part, matched as written, needs no list.
    let single = explanation.parts.len() == 1
        && explanation.omitted == 0
        && winner.is_some_and(|part| part.command == command.trim());
    let listed = if single { &[][..] } else { &explanation.parts[..] };
    let parts: Vec<ExplainPart> = listed
        .iter()
        .take(LISTED_PARTS)
        .map(|part| ExplainPart {
            text: cut(&mask(part.text)),
            matched_text: (part.command != part.text).then(|| cut(&mask(part.command))),
            category: part.decision.category.clone(),
            pattern: match &part.decision.source {
                DecisionSource::Pattern { pattern, .. } => Some(pattern.clone()),
                _ => None,
            },
        })
        .collect();
    let more_parts = listed.len().saturating_sub(LISTED_PARTS) + explanation.omitted;
    let output = ExplainOutput {
        category: decision.category.clone(),
        source,
        pattern,
        exec_timeout_sec: round_secs(decision.limits.exec),
        no_output_timeout_sec: round_secs(decision.limits.no_output),
        policy: origin.to_owned(),
        part: winner.filter(|_| !single).map(|part| cut(&mask(part.text))),
        parts,
        more_parts,
        run_limits: None,
    };
    let mut text = format!("{}: {}", echo(command), describe_limits(decision));
    if let Some(part) = winner.filter(|_| explanation.parts.len() > 1) {
        text.push_str(&format!(" from the part {}", echo(&mask(part.text))));
    }
    text.push_str(&format!(" [policy: {origin}]"));
    if !output.parts.is_empty() {
        let listed: Vec<String> = output
            .parts
            .iter()
            .map(|part| {
                let category = part.category.as_deref().unwrap_or("explicit");
                match &part.matched_text {
                    Some(matched) => format!("{} {category} (as {matched:?})", echo(&part.text)),
                    None => format!("{} {category}", echo(&part.text)),
                }
            })
            .collect();
        text.push_str(&format!(
            "\nParts considered (the longest limits win): {}",
            listed.join("; ")
        ));
        if more_parts > 0 {
            text.push_str(&format!("; and {more_parts} more"));
        }
        if explanation.omitted > 0 {
            text.push_str(&format!(
                " ({} were not matched: past the first {MAX_PARTS} or too long; give \
                 timeout_sec)",
                explanation.omitted
            ));
        }
        text.push('.');
    }
    (text, output)
}

/// One line naming the category and limits a decision applies.
pub(super) fn describe_limits(decision: &Decision) -> String {
    let limits = format!(
        "exec {}, no output {}",
        seconds(decision.limits.exec),
        seconds(decision.limits.no_output)
    );
    match (&decision.source, &decision.category) {
        (DecisionSource::Explicit, _) => format!("explicit timeout ({limits})"),
        (DecisionSource::Pattern { pattern, .. }, Some(category)) => {
            format!("{category} ({limits}; matched {pattern:?})")
        }
        (_, Some(category)) => format!("{category} ({limits}; default category)"),
        (_, None) => limits,
    }
}

/// `text` cut to about [`ECHO_CHARS`](super::ECHO_CHARS) characters, head and tail
/// ([`head_and_tail`]).
fn cut(text: &str) -> String {
    match head_and_tail(text) {
        None => text.to_owned(),
        Some((head, tail, _)) => format!("{head} … {tail}"),
    }
}

#[cfg(test)]
mod tests {
    use shellkeep_engine::Policy;

    use super::*;

    fn words(command: &str) -> (String, ExplainOutput) {
        let policy = Policy::embedded();
        let explanation = policy.explain(command, None);
        explain(command, &explanation, "embedded default", &str::to_owned)
    }

    #[test]
    fn one_part_matched_as_written_lists_nothing() {
        let (text, output) = words("cargo build --release");
        assert_eq!(
            text,
            "\"cargo build --release\": extended (exec 900 s, no output 120 s; matched \"cargo \
             build --release\") [policy: embedded default]"
        );
        assert_eq!((output.part, output.parts.len(), output.more_parts), (None, 0, 0));
    }

    #[test]
    fn parts_are_listed_cut_and_counted() {
        let long = format!("echo {}", "x".repeat(500));
        let command = format!("{long} && cd demo && nice cargo build --release");
        let (text, output) = words(&command);
        assert_eq!(output.part.as_deref(), Some("nice cargo build --release"));
        assert_eq!(output.parts.len(), 3);
        assert!(output.parts[0].text.chars().count() < 210, "{}", output.parts[0].text);
        assert!(output.parts[0].text.contains(" … "), "{}", output.parts[0].text);
        assert_eq!(output.parts[2].matched_text.as_deref(), Some("cargo build --release"));
        assert!(
            text.ends_with(
                "\"cd demo\" quick; \"nice cargo build --release\" extended (as \"cargo build \
                 --release\")."
            ),
            "{text}"
        );
        assert!(text.len() < 1000, "{text}");
    }

    #[test]
    fn snapshot_policy_explain() {
        let (text, output) = words("cargo build --release | tee log");
        expect_test::expect![[r#"
            "cargo build --release | tee log": extended (exec 900 s, no output 120 s; matched "cargo build --release") from the part "cargo build --release" [policy: embedded default]
            Parts considered (the longest limits win): "cargo build --release" extended; "tee log" medium.
            -----
            {
              "category": "extended",
              "source": "pattern",
              "pattern": "cargo build --release",
              "exec_timeout_sec": 900.0,
              "no_output_timeout_sec": 120.0,
              "policy": "embedded default",
              "part": "cargo build --release",
              "parts": [
                {
                  "text": "cargo build --release",
                  "category": "extended",
                  "pattern": "cargo build --release"
                },
                {
                  "text": "tee log",
                  "category": "medium"
                }
              ]
            }
        "#]].assert_eq(&super::super::snapshot(&text, &output));
    }
}
