//! Issue 21, "a namespace it cannot leave", through the real binary: a
//! sandboxed session's shell and a sandboxed `run` command each have a PID
//! namespace of their own (`$$` is 2, the replies say `namespace: true`),
//! and after the guard and then the server are SIGKILLed nothing they
//! started survives, whatever it did to leave its group, session,
//! environment or the server's sight.

use std::time::Duration;

use serde_json::json;

use crate::{Server, alive, assert_none_survive, guard_of, marker, wait_alive, wait_until};

/// How long what the server started may take to be gone after its death.
const CLEANUP: Duration = Duration::from_secs(10);

/// Every way out of a command's group, session and environment, each a
/// background `sleep 300.<marker>`: the command line and the markers.
fn escapes() -> (String, Vec<String>) {
    let markers: Vec<String> = (0..6).map(|_| format!("300.{}", marker())).collect();
    let command = format!(
        "setsid sleep {} & bash -c '(sleep {} &) &'; nohup sleep {} >/dev/null 2>&1 & disown; \
         env -i setsid /bin/sleep {} & (trap '' TERM HUP; exec sleep {}) & \
         python3 -c 'import os; os.setpgid(0, 0); os.execvp(\"sleep\", [\"sleep\", \"{}\"])' &",
        markers[0], markers[1], markers[2], markers[3], markers[4], markers[5]
    );
    (command, markers)
}

#[tokio::test]
async fn a_killed_guard_and_server_leave_nothing_of_a_sandboxed_session_or_run() {
    let mut server = Server::with(&["--sandbox", "workspace-write"]).await;
    let (background, mut markers) = escapes();
    let r = server.terminal(json!({"command": format!("{background} echo \"pid $$\"")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert!(r.output().ends_with("pid 2\n"), "{r:#?}");
    assert_eq!(r["sandbox"]["namespace"], true, "{r:#?}");
    let (run_background, run_markers) = escapes();
    markers.extend(run_markers);
    let peer = server.peer();
    let command = format!("{run_background} sleep 240");
    let call = tokio::spawn(async move {
        crate::call_with(&peer, "run", json!({"command": command, "timeout_sec": 240})).await
    });
    let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
    wait_alive(&markers).await;
    // No guard to clean up after the server: the server is stopped (so it
    // cannot start a new guard), the guard killed, then the server.
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    server.signal("STOP");
    crate::send_signal(guard, "KILL");
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&markers, CLEANUP).await;
    call.abort();
}
