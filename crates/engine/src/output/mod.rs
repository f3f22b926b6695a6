//! A command's output from the moment it is rendered to the moment a reply
//! shows it or the `output` tool reads it back: masked once, stored once,
//! shown as a capped view, and bounded on disk.
//!
//! The files have one job each and one direction: `measure` and `pass` (the
//! one place output text passes, where secrets are masked) are leaves;
//! `spill` (the directory of full-output files, its limits and retention)
//! and `view` (what a reply shows: head and tail) stand beside each other;
//! `log` (the one stored copy of a stream) writes through `spill`; `sink`
//! (the one way a command's output comes in) drives the log and the view;
//! `store` keeps the logs of a session's or a server's commands.
//!
//! Invariant: every piece of output passes `pass` exactly once before it is
//! kept, shown or announced (`Passed` is the only text a log or a view
//! takes; the `one_way_in` test witnesses it end to end).
//!
//! This module does not render terminal escapes (callers do that before)
//! and does not word replies (the server does).

mod log;
mod measure;
#[cfg(test)]
mod one_way_in;
mod pass;
mod sink;
mod spill;
mod store;
mod view;

pub use log::{CommandLog, LogPage, MAX_READ_LINES, NotSaved, READ_CAP, StoreError, Stream};
pub use measure::{count_chars, json_chars, share};
pub(crate) use pass::pass;
pub use pass::{Masking, Passed};
pub use sink::{IDLE_OUTPUT_CAP, IdleOutput, OutputSink};
pub use spill::{
    CommandSpill, DIR_MARK, FILE_TAG, Retention, Saved, SpillCut, SpillLimit, SpillLimits,
    SpillStore, human_bytes, server_prefix,
};
pub use store::{OutputStore, RunLogs, StoreLimits};
pub use view::{CappedOutput, Continued, Shown, ShownLine, UnfinishedLine, head_tail};
