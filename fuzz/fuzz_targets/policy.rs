//! The policy loader on arbitrary text: it accepts or rejects with an
//! error, never panics, and a policy it accepts decides any command. The
//! same text, as a command, is split into parts and decided by the
//! embedded policy without a panic, and every part is a piece of it.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use shellkeep_engine::Policy;

static EMBEDDED: LazyLock<Policy> = LazyLock::new(Policy::embedded);

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(policy) = Policy::from_json(text, "fuzz") {
        for command in ["cargo test", "sleep 10 && echo done", "", "npm run build -- --watch"] {
            let _ = policy.decide(command, None);
        }
    }
    let explanation = EMBEDDED.explain(text, None);
    for part in &explanation.parts {
        assert!(text.contains(part.text) && part.text.contains(part.command));
    }
});
