//! A person beside the agent: `shellkeep ls` lists this user's running
//! servers and their sessions, `shellkeep attach` shows one session live
//! in the person's terminal (read-only, or typing with `--write`).
//!
//! Each serving server listens on `attach.sock` in its private runtime
//! directory (`<base>/<pid>-<start>-<random>/`, mode 0700, so only its
//! user can reach it); every peer's credentials are checked and one of
//! another user reads a single refusal line and nothing else, not even a
//! session name. `ls` asks each server on its socket rather than reading a
//! file: sessions and viewers change all the time, the socket answers with
//! what is true now, and a server that is gone leaves nothing to believe
//! (its directory's name says it is dead, or nothing answers).
//!
//! # The protocol (version 1)
//!
//! 1. The server accepts, checks the peer's uid, and writes one line:
//!    `shellkeep-attach 1` (the version) or a refusal (`shellkeep: refused:
//!    …`), after which it closes. A line is at most 256 bytes.
//! 2. Then both sides write frames: a kind byte, the payload's length (4
//!    bytes, big-endian), the payload. Client frames are at most 4 KiB,
//!    server frames at most 1 MiB (output at most 64 KiB a frame).
//! 3. The client sends one `H` frame, its request as JSON: `{"op":"list"}`
//!    or `{"op":"attach","session":…,"write":…,"since_secs":…,
//!    "show_secrets":…,"window":{"rows":…,"cols":…}}`, within 10 s.
//! 4. To `list`, the server answers one `L` frame (the server and its
//!    sessions, JSON) and closes. To `attach`, it answers `R` (refused,
//!    `{"error":…}`) and closes, or `A` (JSON: server pid, session, its
//!    window, whether writing was granted or someone else holds it since
//!    when, whether output is masked); then `O` frames (the terminal's
//!    output: first the replay, then live) and `E` frames (JSON events:
//!    `live` after the replay, `skipped` when the viewer was too slow,
//!    `resize`, `shell_ended`, `reset`, `waiting`, and the last one,
//!    `closed` or `server_ended`).
//! 5. The client may send `K` frames (keys; typed only when writing was
//!    granted) and `W` frames (its window, JSON). Closing the connection
//!    detaches; the session is not touched.
//!
//! The engine's stream comes without the integration's marker sequences
//! and without the echo of the lines that run the agent's commands; the
//! commands, which the engine names, are shown as `$ command`
//! (`terminal::typed_at_prompt`). Output is masked with the session's secrets by the engine's
//! `RawMasker` unless the viewer asked for `show_secrets` (the same user:
//! the secrets are theirs). Raw masking cannot see a secret that the
//! program breaks up with escape sequences (colour in the middle of a
//! token): that stays visible.
//!
//! The agent's words are not here (they live in `render`); the person's
//! words are, in `client`.

mod client;
mod listen;
mod protocol;

pub use client::{AttachOptions, attach, ls, parse_since};
pub use listen::Listener;
