//! The words and fields of a resource limit that stopped something
//! (`limit_hit`): the kernel's count when a control group applies, the
//! likely cause when only a process limit does.
//!
//! Not for enforcing limits (the engine's `limits`); the sizes are stated
//! through `units`.

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;
use shellkeep_engine::{LimitHit, Resource};

use super::units::limit_bytes;

/// A resource limit that stopped something, as structured content carries
/// it (`limit_hit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub(crate) struct LimitHitOutput {
    /// `memory` (the OOM killer killed a process at the memory limit) or
    /// `tasks` (forks were refused at the tasks limit).
    pub limit: &'static str,
    /// The limit: bytes of memory, or tasks (processes and threads).
    pub max: u64,
    /// Processes killed, or forks refused, since the last reply (0 when
    /// not counted).
    pub times: u64,
    /// True: the kernel counted it (a control group). False: no control
    /// group applies; the limit is a resource limit of the process and the
    /// output shows the failure it causes, its likely cause.
    pub counted: bool,
}

/// The structured facts of `hits`.
pub(crate) fn limit_hit_facts(hits: impl IntoIterator<Item = LimitHit>) -> Vec<LimitHitOutput> {
    hits.into_iter()
        .map(|hit| LimitHitOutput {
            limit: hit.resource.as_str(),
            max: hit.max,
            times: hit.times,
            counted: hit.counted,
        })
        .collect()
}

/// The sentence for a limit that stopped something in `whose` ("this
/// command", "this session").
pub(crate) fn limit_hit_line(hit: &LimitHit, whose: &str) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match hit.resource {
        Resource::Memory if !hit.counted => format!(
            "[An allocation failed in {whose}, which runs under a memory limit of {} per \
             process (RLIMIT_AS: without control groups each process's address space is \
             limited): that limit is the likely cause. Ask for a higher --memory-max, or none.]",
            limit_bytes(hit.max),
        ),
        Resource::Tasks if !hit.counted => format!(
            "[A new process could not start in {whose}, which runs under a limit of {} \
             processes (RLIMIT_NPROC: without control groups it counts every process and thread \
             of the user on this host): that limit is the likely cause. Ask for a higher \
             --tasks-max, or none.]",
            hit.max,
        ),
        Resource::Memory => format!(
            "[The memory limit of {whose} ({}) stopped it: the kernel killed {} that went past \
             it (out of memory). Use less memory at once, or ask for a higher limit \
             (--memory-max, or the limits of the policy's category).]",
            limit_bytes(hit.max),
            plural(hit.times, "process", "processes"),
        ),
        Resource::Tasks => format!(
            "[The tasks limit of {whose} ({} processes and threads) stopped it: the kernel \
             refused {} (\"fork: Resource temporarily unavailable\"). What already runs keeps \
             running until it ends or is stopped (C-c, reset=true, or the end of a `run`).]",
            hit.max,
            plural(hit.times, "new process", "new processes"),
        ),
        Resource::Cpu => format!("[The CPU limit of {whose} slowed it down.]"),
    }
}
