//! The environment every child we start gets on top of the server's: the
//! defaults that keep pagers, editors and prompts from hanging a command
//! nobody watches, and the server's own variables no child may see.
//!
//! Not for: spawning (`spawn.rs` applies these) or scope markers
//! (`scope.rs`). Holds: no variable we set outranks a way to ask for a
//! pager or an editor for one command.

use std::sync::OnceLock;

/// Environment set for every child we start, terminal and one-shot alike,
/// besides git's editor and pager ([`noninteractive_env`]).
///
/// Pagers and prompts are the classic ways an agent's command hangs forever
/// on a terminal nobody is watching; these defaults turn them off. Each is
/// an ordinary variable a command can set for itself (`PAGER=less man ls`).
/// No variable here outranks another way to ask for a pager: `man` reads
/// `MANPAGER`, then `PAGER`; git reads `GIT_PAGER`, then `core.pager`, then
/// `PAGER`. So `MANPAGER` and `GIT_PAGER` are not set (and are removed:
/// [`NONINTERACTIVE_UNSET`]), `man` follows `PAGER`, and git's pager is its
/// configuration ([`GIT_PAGER_CONFIG`]).
pub(crate) const NONINTERACTIVE_ENV: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("GH_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("PYTHONUNBUFFERED", "1"),
    ("PIP_NO_INPUT", "1"),
];

/// The editor git runs for a commit message or a `rebase -i` list: `true`,
/// which leaves the file as it is (`git commit` without `-m` then aborts,
/// `git rebase -i` keeps its list). It is git's `core.editor`, given
/// through git's environment configuration (`GIT_CONFIG_COUNT`, git 2.31
/// and later), which wins over the user's config files but not over
/// `git -c core.editor=vim` or `GIT_EDITOR=vim`: an agent that asks for an
/// editor gets it. (`GIT_EDITOR=true` would win over `git -c` too.)
pub(crate) const GIT_EDITOR_CONFIG: (&str, &str) = ("core.editor", "true");

/// git's pager: `cat`, which git takes as no pager. Given as git's
/// `core.pager` through its environment configuration, like the editor, so
/// that `git -c core.pager=less log` and `GIT_PAGER=less git log` page.
/// (`GIT_PAGER=cat` would win over `git -c`; `PAGER=less git log` does not
/// page, since `core.pager` outranks `PAGER`.)
pub(crate) const GIT_PAGER_CONFIG: (&str, &str) = ("core.pager", "cat");

/// Variables removed from every child's environment: set in the server's
/// own environment, they would outrank the defaults above (`MANPAGER`
/// over `PAGER`, `GIT_PAGER` over `core.pager`). A command sets them for
/// itself to page on purpose (`MANPAGER=less man ls`).
pub(crate) const NONINTERACTIVE_UNSET: &[&str] = &["MANPAGER", "GIT_PAGER"];

/// Variables of the server's own, removed from every child's environment:
/// the HTTP transport's bearer token, which would let any command call the
/// server as its principal (and outlive a change of the token).
pub(crate) const SERVER_ONLY: &[&str] = &["SHELLKEEP_TOKEN"];

/// [`NONINTERACTIVE_ENV`] and git's editor and pager, for a server whose
/// own environment holds `GIT_CONFIG_COUNT=inherited_count` (entries of its
/// own, kept: ours are added after them).
pub(crate) fn noninteractive_env(inherited_count: Option<&str>) -> Vec<(String, String)> {
    let index = inherited_count.and_then(|count| count.parse::<u16>().ok()).unwrap_or(0);
    let mut env: Vec<(String, String)> = NONINTERACTIVE_ENV
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    let ours = [GIT_EDITOR_CONFIG, GIT_PAGER_CONFIG];
    env.push(("GIT_CONFIG_COUNT".to_owned(), (u32::from(index) + ours.len() as u32).to_string()));
    for (n, (key, value)) in (u32::from(index)..).zip(ours) {
        env.push((format!("GIT_CONFIG_KEY_{n}"), key.to_owned()));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), value.to_owned()));
    }
    env
}

/// The environment every child gets on top of the server's: see
/// [`noninteractive_env`]. Read once.
pub(crate) fn child_env() -> &'static [(String, String)] {
    static ENV: OnceLock<Vec<(String, String)>> = OnceLock::new();
    ENV.get_or_init(|| {
        let count = std::env::var("GIT_CONFIG_COUNT").ok();
        noninteractive_env(count.as_deref())
    })
}
