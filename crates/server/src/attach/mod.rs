//! A person beside the agent: `shellkeep ls` lists this user's running
//! servers and their sessions, `shellkeep attach` shows one session live
//! in the person's terminal (read-only, or typing with `--write`). Each
//! serving server listens on `attach.sock` in its private runtime
//! directory (`listen`); `ls` asks each server on its socket rather than
//! reading a file, so that what it shows is true now (`client`); both ends
//! speak the protocol of `protocol` (its steps are on
//! `protocol::VERSION`).
//!
//! It holds the agent's words nowhere (they live in `render`). It holds
//! that a peer of another user reads one refusal line and nothing else,
//! not even a session name, and that a process of the server's own
//! sessions cannot attach to them.

mod client;
mod listen;
mod protocol;

pub(crate) use client::{AttachOptions, attach, ls};
pub(crate) use listen::Listener;
