//! Issue 14: a program that polls the terminal while its child works (apt
//! waiting for dpkg) is never reported as waiting for input over the wire:
//! the replies say `running`, a new command is not executed only because
//! the command runs, and its output and exit code arrive.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::{Server, poll_until};

#[tokio::test]
async fn apt_waiting_for_dpkg_is_running_not_waiting_for_input() {
    let server = Server::start().await;
    let apt: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "fake", "apt.py"].iter().collect();
    // dpkg prints a line, then is silent for 6 s, as when man-db's
    // triggers run: a call that ends meanwhile says it runs.
    let r = server
        .terminal(json!({"command": format!("python3 '{}' 1 6", apt.display()), "timeout": 2}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert_ne!(r["waiting_for_input"], true, "{r:#?}");
    assert!(r.output().contains("Setting up package-0"), "{r:#?}");
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert_ne!(r["waiting_for_input"], true, "{r:#?}");
    let r = poll_until(
        Duration::from_secs(30),
        async || server.terminal(json!({"command": "", "timeout": 5})).await,
        |r| r["status"] != "running",
    )
    .await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
    assert!(r.output().ends_with("Done\n"), "{r:#?}");
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!(r.output(), "next\n", "{r:#?}");
}
