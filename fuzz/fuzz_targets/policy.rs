//! The policy loader on arbitrary text: it accepts or rejects with an
//! error, never panics, and a policy it accepts decides any command.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shellkeep_engine::policy::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(policy) = Policy::from_json(text, "fuzz") {
        for command in ["cargo test", "sleep 10 && echo done", "", "npm run build -- --watch"] {
            let _ = policy.decide(command, None);
        }
    }
});
