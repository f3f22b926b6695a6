//! The words and fields of the sandbox (`--sandbox`, `--network`): the
//! sentence tool descriptions and `doctor` use for a policy, the `sandbox`
//! object every reply of a confined session or command carries (what the
//! kernel enforces, and what it does not), the one sentence that says a
//! failed command was most likely stopped by the sandbox, and the errors
//! and notices of a `sandbox` or `network` argument. It decides nothing:
//! the engine's `sandbox` module says what is enforced and what a failure
//! looks like.

use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::{Denial, Enforcement, SandboxMode as Mode, SandboxPolicy as Policy};

use rmcp::schemars;

use super::{and_list, in_text};

/// What the kernel enforces for a confined session or command, as every
/// reply's structured content carries it (`sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct SandboxOutput {
    /// The mode: `off`, `workspace-write` or `read-only`.
    pub mode: &'static str,
    /// `on` or `off` (every socket but Unix ones denied).
    pub network: &'static str,
    /// The Landlock ABI the kernel offers; null where there is no Landlock.
    pub landlock_abi: Option<u32>,
    /// Whether the write rules are enforced (Landlock).
    pub filesystem: bool,
    /// Whether Landlock's TCP rules back the network filter.
    pub tcp: bool,
    /// Whether the seccomp filter is on: no tracing of the shell, no input
    /// pushed into the terminal, no signal to the server (and, with the
    /// network off, no socket but Unix ones).
    pub filter: bool,
    /// Whether no signal leaves the sandbox (Landlock's signal scope).
    pub signals: bool,
    /// Whether it runs in a PID namespace of its own.
    pub namespace: bool,
    /// Each thing asked for and not enforced here, in words (started with
    /// `--sandbox-best-effort`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
}

impl SandboxOutput {
    /// The fields of `enforcement`.
    pub(crate) fn new(enforcement: &Enforcement) -> SandboxOutput {
        SandboxOutput {
            mode: enforcement.mode,
            network: on_off(enforcement.network),
            landlock_abi: enforcement.landlock_abi,
            filesystem: enforcement.filesystem,
            tcp: enforcement.tcp,
            filter: enforcement.filter,
            signals: enforcement.signals,
            namespace: enforcement.namespace,
            not_enforced: enforcement.missing.clone(),
        }
    }
}

/// `on` or `off`, as `--network` takes it.
fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// A confined policy in a few words, for a listing (`read-only, network
/// off`); `None` for no sandbox.
pub(crate) fn short(policy: &Policy) -> Option<String> {
    policy.is_confined().then(|| {
        let network = if policy.network { "network on" } else { "network off" };
        format!("{}, {network}", policy.mode.as_str())
    })
}

/// What a policy lets commands do, in one sentence for people and models:
/// `workspace-write: commands may write only in /work/app, their temporary
/// directory ($TMPDIR) and the terminal; the network is off (Unix sockets
/// only)`.
pub(crate) fn policy(policy: &Policy) -> String {
    let writes = match policy.mode {
        Mode::Off => "off: commands may write wherever the server's user may".to_owned(),
        Mode::WorkspaceWrite => {
            let dirs: Vec<String> = policy.writable.iter().map(|dir| in_text(dir)).collect();
            let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
            format!(
                "workspace-write: commands may write only in {}, their temporary directory \
                 ($TMPDIR) and the terminal",
                and_list(&dirs)
            )
        }
        Mode::ReadOnly => "read-only: commands may write only in their temporary directory \
                           ($TMPDIR) and the terminal"
            .to_owned(),
    };
    let network = if policy.network {
        "the network is on"
    } else {
        "the network is off (every socket but Unix ones is denied)"
    };
    format!("{writes}; {network}")
}

/// The paragraph of the `terminal` and `run` descriptions that states the
/// server's sandbox and what a call may ask for; `None` for a server
/// without one (nothing to state: a call may still ask for one).
pub(crate) fn description(server: &Policy, enforcement: Option<&Enforcement>) -> Option<String> {
    if !server.is_confined() {
        return None;
    }
    let mut text = format!("Sandbox (enforced by the kernel): {}.", policy(server));
    if let Some(missing) = enforcement.map(|e| &e.missing).filter(|missing| !missing.is_empty()) {
        text.push_str(&format!(" Not enforced on this host: {}.", missing.join("; ")));
    }
    text.push_str(
        " Tracing the shell, pushing input into the terminal and signalling the server are \
         denied; sudo cannot gain privileges. A failure the sandbox caused is said so in the \
         reply.",
    );
    Some(text)
}

/// The description of the `sandbox` argument, stating the server's mode.
pub(crate) fn sandbox_argument(server: &Policy, what: &str) -> String {
    let stricter = match server.mode {
        Mode::Off => {
            "`workspace-write` (writes only in the workspace, the temporary directory \
                      and the terminal) or `read-only` (writes only in the temporary directory \
                      and the terminal)"
        }
        Mode::WorkspaceWrite => {
            "`read-only` (writes only in the temporary directory and the \
                                 terminal)"
        }
        Mode::ReadOnly => "nothing stricter",
    };
    format!(
        "The sandbox of {what}: at least as strict as this server's `{}`; stricter is {stricter}. \
         Default: the server's.",
        server.mode.as_str()
    )
}

/// The description of the `network` argument, stating the server's.
pub(crate) fn network_argument(server: &Policy, what: &str) -> String {
    if server.network {
        format!(
            "The network of {what}: `off` denies every socket but Unix ones. This server's \
             network is on (the default)."
        )
    } else {
        format!(
            "The network of {what}: this server's network is off (every socket but Unix ones is \
             denied), and `on` is refused."
        )
    }
}

/// The error for a `sandbox` or `network` argument looser than the
/// server's: `why` is the engine's reason.
pub(crate) fn looser_refused(why: &str, server: &Policy) -> String {
    format!(
        "{why}. This server runs with --sandbox {} --network {}: a session or `run` may ask only \
         for a stricter sandbox (a stricter mode, or network off). Omit sandbox and network to \
         get the server's, or ask the person running the server to change its flags.",
        server.mode.as_str(),
        on_off(server.network)
    )
}

/// The notice that `sandbox` or `network` did not apply: the session was
/// already running, with its own.
pub(crate) fn sandbox_ignored(name: &str, running: &Policy) -> String {
    format!(
        "[sandbox and network apply only to the call that starts a session: session {name:?} was \
         already running with sandbox {} and network {}; close it with session_close to start \
         it again with another.]",
        running.mode.as_str(),
        on_off(running.network)
    )
}

/// Why a failed command most likely failed because of the sandbox, as the
/// reply's structured content carries it (`sandbox_denial`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct DenialOutput {
    /// `write` (outside what the mode lets it write), `network` (a socket
    /// other than a Unix one), `sudo` (no_new_privs), `trace` (no
    /// `ptrace`) or `signal` (a process outside the sandbox).
    pub denied: &'static str,
    /// The path it could not write, when the output names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The one sentence, and the field, that say a failed command was most
/// likely stopped by the sandbox (`policy`: the one it ran under).
pub(crate) fn denial(denial: &Denial, policy: &Policy) -> (String, DenialOutput) {
    match denial {
        Denial::Write { path } => {
            let what = match path {
                Some(path) => format!("writing {path:?}"),
                None => "a write".to_owned(),
            };
            let instead = match policy.mode {
                Mode::ReadOnly => {
                    "Write under $TMPDIR instead, or work in a session whose \
                                   sandbox lets it write the workspace."
                }
                _ => {
                    "Work inside the workspace, or ask the person running the server for \
                      another --writable."
                }
            };
            let line = format!(
                "[The sandbox, not the program, most likely refused {what}: {}. {instead}]",
                policy_writes(policy)
            );
            (line, DenialOutput { denied: "write", path: path.clone() })
        }
        Denial::Network => (
            "[The sandbox, not the program, most likely refused a network socket: the network \
             is off here (--network off; every socket but Unix ones is denied). A local server \
             on a Unix socket still works.]"
                .to_owned(),
            DenialOutput { denied: "network", path: None },
        ),
        Denial::Sudo => (
            "[sudo cannot work in the sandbox: commands run with no_new_privs, so sudo and other \
             setuid programs cannot gain privileges. Run what needs root outside shellkeep.]"
                .to_owned(),
            DenialOutput { denied: "sudo", path: None },
        ),
        Denial::Trace => (
            "[The sandbox, not the program, most likely refused tracing a process: no command \
             in the sandbox may use ptrace (gdb, strace). Debug a core file instead (gdb \
             PROGRAM CORE), or use a debugger of the language that needs no ptrace (pdb).]"
                .to_owned(),
            DenialOutput { denied: "trace", path: None },
        ),
        Denial::Signal => (
            "[The sandbox most likely refused that signal: its commands may signal only the \
             processes they started, never the server, its guard or another session (in a PID \
             namespace of its own, processes outside are not in sight at all).]"
                .to_owned(),
            DenialOutput { denied: "signal", path: None },
        ),
    }
}

/// What `policy` lets commands write, for the denial sentence.
fn policy_writes(policy: &Policy) -> String {
    let text = self::policy(policy);
    let writes = text.split_once("; ").map_or(text.as_str(), |(writes, _)| writes);
    format!("the sandbox is {writes}")
}

/// What the kernel enforces of a policy, for `doctor`: each part that is
/// on, then what is not (`enforced on this host: …; not enforced: …`).
pub(crate) fn enforced(enforcement: &Enforcement) -> String {
    let landlock = match enforcement.landlock_abi {
        Some(abi) => format!("Landlock ABI {abi}"),
        None => "no Landlock".to_owned(),
    };
    let parts = [
        (enforcement.filesystem, "the write rules"),
        (enforcement.tcp, "Landlock's TCP rules"),
        (enforcement.filter, "the seccomp filter (no ptrace, TIOCSTI or signal to the server)"),
        (enforcement.signals, "Landlock's signal scope"),
        (enforcement.namespace, "a PID namespace of its own"),
    ];
    let on: Vec<&str> = parts.iter().filter(|(on, _)| *on).map(|(_, what)| *what).collect();
    let mut line = format!(
        "{landlock}; enforced: {}",
        if on.is_empty() { "nothing".to_owned() } else { and_list(&on) }
    );
    if !enforcement.namespace {
        line.push_str("; no PID namespace of its own (the control groups and markers contain it)");
    }
    if !enforcement.missing.is_empty() {
        line.push_str(&format!("; NOT enforced: {}", enforcement.missing.join("; ")));
    }
    line
}

/// `doctor`'s lines on the sandbox: what the flags ask for and what the
/// kernel enforces of it (`asked`: the policy, or why the flags are
/// wrong; `check`: the engine's answer, an error naming what is missing),
/// then what each mode would enforce here (`modes`).
pub(crate) fn doctor(
    asked: &Result<Policy, String>,
    check: Option<&Result<Enforcement, String>>,
    modes: &[(Policy, Result<Enforcement, String>)],
) -> Vec<String> {
    let mut lines = Vec::new();
    match (asked, check) {
        (Err(err), _) => lines.push(format!("sandbox: the flags are wrong ({err})")),
        (Ok(policy), None) => lines.push(format!(
            "sandbox: off ({}); a session or run may ask for one",
            self::policy(policy)
        )),
        (Ok(policy), Some(Ok(enforcement))) => {
            lines.push(format!("sandbox: {} ({})", self::policy(policy), enforced(enforcement)))
        }
        (Ok(policy), Some(Err(err))) => lines.push(format!(
            "sandbox: {} FAILS: the server would not start ({err})",
            self::policy(policy)
        )),
    }
    for (policy, result) in modes {
        let network = if policy.network { "network on" } else { "network off" };
        let what = match result {
            Ok(enforcement) => enforced(enforcement),
            Err(err) => format!("cannot be enforced: {err}"),
        };
        lines.push(format!("  {} with {network}: {what}", policy.mode.as_str()));
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn policy_of(mode: Mode, network: bool) -> Policy {
        Policy {
            mode,
            writable: vec![PathBuf::from("/work/app"), PathBuf::from("/data")],
            network,
            best_effort: false,
        }
    }

    #[test]
    fn a_policy_is_one_sentence_that_names_what_may_be_written_and_the_network() {
        assert_eq!(
            policy(&policy_of(Mode::WorkspaceWrite, false)),
            "workspace-write: commands may write only in /work/app and /data, their temporary \
             directory ($TMPDIR) and the terminal; the network is off (every socket but Unix \
             ones is denied)"
        );
        assert_eq!(
            policy(&policy_of(Mode::ReadOnly, true)),
            "read-only: commands may write only in their temporary directory ($TMPDIR) and the \
             terminal; the network is on"
        );
        assert!(description(&policy_of(Mode::Off, true), None).is_none());
        let network_only = description(&policy_of(Mode::Off, false), None).expect("confined");
        assert!(network_only.starts_with("Sandbox (enforced by the kernel): off: "));
    }

    #[test]
    fn each_denial_is_one_sentence_with_its_field() {
        let ws = policy_of(Mode::WorkspaceWrite, false);
        let (line, field) = denial(&Denial::Write { path: Some("/etc/x".into()) }, &ws);
        assert_eq!(
            line,
            "[The sandbox, not the program, most likely refused writing \"/etc/x\": the sandbox \
             is workspace-write: commands may write only in /work/app and /data, their \
             temporary directory ($TMPDIR) and the terminal. Work inside the workspace, or ask \
             the person running the server for another --writable.]"
        );
        assert_eq!(field, DenialOutput { denied: "write", path: Some("/etc/x".into()) });
        let read_only = policy_of(Mode::ReadOnly, true);
        let (line, _) = denial(&Denial::Write { path: None }, &read_only);
        assert!(line.contains("refused a write: the sandbox is read-only"), "{line}");
        assert!(
            line.ends_with(
                "Write under $TMPDIR instead, or work in a session whose sandbox \
                                lets it write the workspace.]"
            ),
            "{line}"
        );
        let (line, field) = denial(&Denial::Network, &ws);
        assert!(line.contains("--network off") && field.denied == "network", "{line}");
        let (line, field) = denial(&Denial::Sudo, &ws);
        assert!(line.contains("no_new_privs") && field.denied == "sudo", "{line}");
    }

    /// `doctor` says what each mode gets, what is missing, and a policy
    /// the kernel cannot enforce (made up here: this host enforces all).
    #[test]
    fn doctor_says_what_is_enforced_and_what_is_not() {
        let full = Enforcement {
            mode: "workspace-write",
            network: false,
            landlock_abi: Some(7),
            filesystem: true,
            tcp: true,
            filter: true,
            signals: true,
            namespace: false,
            missing: Vec::new(),
        };
        let old = Enforcement {
            landlock_abi: None,
            filesystem: false,
            tcp: false,
            signals: false,
            missing: vec!["the write rules need Landlock: this kernel has no Landlock".into()],
            ..full.clone()
        };
        let asked = Ok(policy_of(Mode::WorkspaceWrite, false));
        let refused = Err("the sandbox asked for cannot be enforced here: no Landlock".to_owned());
        let modes = [(policy_of(Mode::ReadOnly, false), Ok(old.clone()))];
        let lines = doctor(&asked, Some(&refused), &modes);
        assert_eq!(
            lines,
            [
                "sandbox: workspace-write: commands may write only in /work/app and /data, their \
                 temporary directory ($TMPDIR) and the terminal; the network is off (every \
                 socket but Unix ones is denied) FAILS: the server would not start (the sandbox \
                 asked for cannot be enforced here: no Landlock)",
                "  read-only with network off: no Landlock; enforced: the seccomp filter (no \
                 ptrace, TIOCSTI or signal to the server); no PID namespace of its own (the \
                 control groups and markers contain it); NOT enforced: the write rules need \
                 Landlock: this kernel has no Landlock",
            ]
        );
        let line = enforced(&full);
        assert!(line.starts_with("Landlock ABI 7; enforced: the write rules, Landlock's TCP"));
        assert!(!line.contains("NOT enforced"), "{line}");
        let off = doctor(&Ok(policy_of(Mode::Off, true)), None, &[]);
        assert!(off[0].starts_with("sandbox: off (off: commands may write wherever"), "{off:?}");
        // The reply's field carries what is missing.
        assert_eq!(SandboxOutput::new(&old).not_enforced, old.missing);
        assert_eq!(SandboxOutput::new(&full).network, "off");
    }

    #[test]
    fn a_looser_request_names_the_servers_setting() {
        let message = looser_refused(
            "sandbox off is looser than the server's workspace-write",
            &policy_of(Mode::WorkspaceWrite, false),
        );
        assert!(message.contains("--sandbox workspace-write --network off"), "{message}");
    }
}
