//! A command's output from its rendering to a reply or a read: masked once,
//! stored once, shown as a capped view, bounded on disk.
//!
//! One job per file, one direction: `measure` and `pass` (the one place
//! output text passes, where secrets are masked) are leaves; `view` (what a
//! reply shows) and `spill` (the full-output directory, its limits and
//! retention) stand side by side; `log` (the one stored copy of a stream)
//! writes through `spill`; `sink` (the one way output comes in) drives the
//! log and the view; `store` keeps the numbered logs of a session or server.
//!
//! Invariant: every piece of output passes `pass` exactly once before it is
//! kept, shown or announced (`Passed` is the only text a log or a view takes;
//! `one_way_in` witnesses it end to end). Not here: rendering terminal
//! escapes (done before) and wording replies (the server's `render`).

mod log;
mod measure;
#[cfg(test)]
mod one_way_in;
mod pass;
mod sink;
mod spill;
mod store;
mod view;

pub(crate) use log::CommandLog;
pub use log::{LogPage, MAX_READ_LINES, NotSaved, READ_CAP, StoreError, Stream};
pub(crate) use measure::count_chars;
pub use measure::{json_chars, share};
pub(crate) use pass::Masking;
pub(crate) use pass::pass;
pub(crate) use sink::{IdleOutput, OutputSink};
pub(crate) use spill::{CommandSpill, human_bytes};
pub use spill::{Retention, Saved, SpillCut, SpillLimit, SpillLimits, SpillStore, server_prefix};
pub use store::{OutputStore, StoreLimits};
pub use view::Shown;
pub(crate) use view::{UnfinishedLine, head_tail};
