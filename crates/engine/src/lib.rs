//! The shellkeep engine: persistent shell sessions in a real PTY, a one-shot
//! runner, and the timeout policy that keeps both from hanging.
//!
//! It knows nothing about MCP, JSON-RPC or how results are rendered for an
//! agent; the `shellkeep` server crate does that.

pub mod bash_script;
pub mod cgroup;
pub mod guard;
pub mod input_wait;
pub mod keys;
pub mod limits;
pub mod mask;
pub mod oneshot;
pub mod output;
pub mod policy;
pub mod private_fs;
pub mod proc_shell;
pub mod process;
pub mod random;
pub mod record;
pub mod registry;
pub mod runtime_dir;
pub mod sandbox;
pub mod screen;
pub mod secrets;
pub mod session;
pub mod syntax;
pub mod terminal;
mod utf8;
