//! Output hostile to a terminal emulator, through the real binary (issue
//! 7): the server stays up, its memory stays bounded by the terminal's
//! window, and nothing printed on an alternate screen is lost.

use serde_json::json;

use crate::Server;

/// The server's peak resident memory so far, in bytes (`VmHWM`).
fn peak_memory(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid))
        .expect("read the server's /proc status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib * 1024
}

/// Well above what the server needs (about 15 MB), well below what the
/// unbounded renderer took for the same inputs (hundreds of MB).
const PEAK_LIMIT: u64 = 64 << 20;

/// Issue 7: 4000 cursor moves of 65535 columns aborted the server on a
/// failed 1 GB allocation; 12 KB of `ESC[65535B` became a 131 MB file.
#[tokio::test]
async fn huge_cursor_moves_neither_crash_nor_grow() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "for i in $(seq 4000); do printf '\\e[65535C'; done; echo x"}))
        .await;
    assert_eq!(r.output(), format!("{}x\n", " ".repeat(199)), "{r:#?}");

    let r = server
        .terminal(json!({"command": "for i in $(seq 3000); do printf '\\e[65535B'; done; echo x"}))
        .await;
    assert_eq!(r.output(), format!("{}x\n", "\n".repeat(49)), "{r:#?}");
    assert_eq!(r["truncated"], false, "{r:#?}");

    let r = server.terminal(json!({"command": "echo alive"})).await;
    assert_eq!(r.output(), "alive\n");
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));
}

/// Issue 7: a line with no newline cost about 5 bytes per character; a
/// 100 MB OSC string was buffered whole by the parser.
#[tokio::test]
async fn a_long_line_or_osc_string_costs_about_its_own_size() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({
            "command": "head -c 20000000 /dev/zero | tr '\\0' x; echo",
            "timeout": 120,
        }))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert_eq!(r["truncated"], true, "{r:#?}");
    let full = r["full_output_path"].as_str().expect("the full output is kept");
    let full = std::fs::read(full).expect("read the full output");
    assert_eq!(full.len(), 20_000_001);
    assert!(full[..20_000_000].iter().all(|&b| b == b'x') && full.ends_with(b"\n"));
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));

    let r = server
        .terminal(json!({
            "command": "printf '\\e]0;'; head -c 100000000 /dev/zero | tr '\\0' t; printf '\\a'; echo after",
            "timeout": 120,
        }))
        .await;
    assert_eq!(r.output(), "after\n", "{r:#?}");
    assert!(peak_memory(&server) < PEAK_LIMIT, "peak {} bytes", peak_memory(&server));
}

/// Issue 7: output printed while a program holds the alternate screen is in
/// the reply and in the full output when the command ends there.
#[tokio::test]
async fn output_on_an_alternate_screen_is_never_lost() {
    let server = Server::with(&["--output-cap", "100"]).await;
    let r =
        server.terminal(json!({"command": "printf '\\e[?1049h'; echo IMPORTANT; (exit 3)"})).await;
    assert_eq!(r.output(), "IMPORTANT\n", "{r:#?}");
    assert_eq!(r["exit_code"], 3, "{r:#?}");
    assert!(r.text.contains("IMPORTANT"), "{}", r.text);

    // Longer than the cap: the full output file has all of it.
    let r = server
        .terminal(json!({"command": "printf '\\e[?1049h'; seq 1 60; echo IMPORTANT; (exit 3)"}))
        .await;
    assert_eq!(r["exit_code"], 3, "{r:#?}");
    assert!(r.output().ends_with("IMPORTANT\n"), "{r:#?}");
    let full = r["full_output_path"].as_str().expect("the output was cut");
    let expected: String = (1..=60).map(|n| format!("{n}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(full).expect("read the full output"),
        format!("{expected}IMPORTANT\n")
    );
}
