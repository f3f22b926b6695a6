//! Issue 12, section 1: every output is stored once, in its command log.
//! A big terminal output leaves one file of its size; a `run` reply whose
//! stdout or stderr was cut names the `output` call that reads the rest,
//! and that call (and paging on from it) reads the stream back whole; the
//! per-command disk limit counts each byte once; `run` outputs are kept
//! under the same retention as a session's.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Server;

/// The files a server wrote in the output directory `dir` (its mark left
/// out), with their sizes.
fn output_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the output directory")
        .flatten()
        .filter(|entry| entry.file_name() != ".shellkeep-output")
        .map(|entry| (entry.path(), entry.metadata().expect("stat").len()))
        .collect();
    files.sort();
    files
}

/// Every line of a `run` stream, paged with the `output` tool from
/// `offset` as an agent follows `next_offset`.
async fn read_run(server: &Server, run: u64, stream: &str, mut offset: u64) -> String {
    let mut text = String::new();
    loop {
        let args = json!({"run": run, "stream": stream, "offset": offset, "limit": 5000});
        let page = server.call("output", args).await;
        assert!(!page.is_error, "{page:#?}");
        assert_eq!((page["run"].as_u64(), page["stream"].as_str()), (Some(run), Some(stream)));
        text.push_str(page["lines"].as_str().expect("lines"));
        let next = page["next_offset"].as_u64().expect("next_offset");
        if next == offset || next >= page["total_lines"].as_u64().expect("total_lines") {
            assert_eq!(page["running"], false, "{page:#?}");
            return text;
        }
        offset = next;
    }
}

fn numbers(from: u64, to: u64) -> String {
    (from..=to).map(|i| format!("{i}\n")).collect()
}

/// The README's measurement: `seq 1 2000000` through the terminal left two
/// files (a reply's part file and the command log), 29.8 MB for 14.9 MB of
/// output. Now it leaves exactly one, of the output's size, and `output`
/// reads it.
#[tokio::test]
async fn a_big_terminal_output_leaves_one_file_of_its_size() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "seq 1 2000000", "timeout": 120})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert_eq!(r["truncated"], true, "{r:#?}");
    let path = PathBuf::from(r["full_output_path"].as_str().expect("the log is named"));
    // 14.9 MB.
    let expected_len = numbers(1, 2_000_000).len() as u64;
    let files = output_files(path.parent().expect("a directory"));
    assert_eq!(files, vec![(path.clone(), expected_len)], "one file, the log");
    // The reply names the `output` call for what it left out, and reads it.
    assert!(r.text.contains("[Read the lines left out with the output tool: {\"command\": 1,"));
    let last = server.call("output", json!({"offset": -1})).await;
    assert_eq!(last["lines"], "2000000\n", "{last:#?}");
    assert_eq!(last["total_lines"], 2_000_000, "{last:#?}");
}

/// A `run` whose stdout and stderr were both cut: the reply names, in its
/// text and structured content, the `output` call for each stream's lines
/// left out and the file; the call reads exactly those lines; paging reads
/// both streams back whole.
#[tokio::test]
async fn a_cut_run_output_is_read_back_whole_through_output() {
    let server = Server::with(&["--output-cap", "200"]).await;
    let r = server
        .run(json!({"command": "seq 1 30000; seq 1 20000 >&2; echo done", "timeout_sec": 60}))
        .await;
    assert_eq!(r["status"], "success", "{r:#?}");
    let call = r["stdoutOutputCall"].clone();
    let err_call = r["stderrOutputCall"].clone();
    let run = call["run"].as_u64().expect("the run's number");
    assert_eq!(call["stream"], "stdout", "{r:#?}");
    assert_eq!(err_call["stream"], "stderr", "{r:#?}");
    assert_eq!(err_call["run"].as_u64(), Some(run));
    for (name, call) in [("stdout", &call), ("stderr", &err_call)] {
        let stream = if name == "stderr" { ", \"stream\": \"stderr\"" } else { "" };
        let line = format!(
            "[Read the lines of {name} left out with the output tool: {{\"run\": {run}{stream}, \
             \"offset\": {}, \"limit\": {}}}]",
            call["offset"], call["limit"]
        );
        assert!(r.text.contains(&line), "{line} not in {}", r.text);
    }
    // The file is still named, and holds the stream.
    let stdout_path = r["fullStdoutPath"].as_str().expect("a path");
    let full_out = numbers(1, 30_000) + "done\n";
    assert_eq!(std::fs::read_to_string(stdout_path).expect("read"), full_out);
    assert!(r["fullStderrPath"].as_str().is_some(), "{r:#?}");

    // The call as named starts on the line the omission starts on (the
    // head showed lines before it, and maybe the beginning of it), and
    // paging on from it reads the rest of the stream.
    let offset = call["offset"].as_u64().expect("offset");
    let page = server.call("output", call.clone()).await;
    assert!(!page.is_error, "{page:#?}");
    assert_eq!(page["first_line"].as_u64(), Some(offset), "{page:#?}");
    assert_eq!(page["line_count"], call["limit"], "{page:#?}");
    let shown = r["stdout"].as_str().expect("stdout");
    let head = shown.split_once("[... ").expect("an omission line").0;
    let before: String = full_out.split_inclusive('\n').take(offset as usize).collect();
    let partial = head.strip_prefix(before.as_str()).expect("the head starts with whole lines");
    let partial = partial.trim_end_matches('\n');
    assert!(!partial.contains('\n'), "{partial:?}");
    let rest = read_run(&server, run, "stdout", offset).await;
    assert!(rest.starts_with(partial), "{partial:?} then {:?}", &rest[..40]);
    assert!(format!("{before}{rest}") == full_out, "the lines from the offset are the rest");
    // Whole, paging from 0: stdout, and stderr through `stream`.
    assert_eq!(read_run(&server, run, "stdout", 0).await, full_out);
    assert_eq!(read_run(&server, run, "stderr", 0).await, numbers(1, 20_000));
    // `output` without arguments still reads the latest terminal command.
    server.terminal(json!({"command": "echo terminal"})).await;
    let latest = server.call("output", json!({})).await;
    assert_eq!(latest["lines"], "terminal\n", "{latest:#?}");
    assert_eq!(latest["session"], "default", "{latest:#?}");
}

/// `run` with `session` or `command` is refused, as is `stream` without
/// `run`, each saying what to give instead.
#[tokio::test]
async fn output_arguments_for_runs_and_sessions_do_not_mix() {
    let server = Server::start().await;
    server.run(json!({"command": "echo once"})).await;
    for args in [
        json!({"run": 1, "session": "default"}),
        json!({"run": 1, "command": 1}),
        json!({"stream": "stderr"}),
        json!({"stream": "stderr", "command": 1}),
    ] {
        let r = server.call("output", args.clone()).await;
        assert!(r.is_error, "{args}: {r:#?}");
        let text = r.text.to_lowercase();
        assert!(text.contains("`run`") && text.contains("give"), "{args}: {}", r.text);
    }
    let r = server.call("output", json!({"run": 1, "stream": "stdout"})).await;
    assert_eq!(r["lines"], "once\n", "{r:#?}");
    let r = server.call("output", json!({"run": 1, "stream": "both"})).await;
    assert!(r.is_error, "{r:#?}");
}

/// The per-command limit counts each byte once, over a command's streams:
/// a `run` printing 4 MB on stdout and stderr with a 1 MiB limit leaves at
/// most 1 MiB of output on disk (plus the cut line), and so does a terminal
/// command.
#[tokio::test]
async fn the_per_command_limit_counts_each_byte_once() {
    let server = Server::with(&["--output-cap", "200", "--full-output-max-mib", "1"]).await;
    let r =
        server.run(json!({"command": "seq 1 300000; seq 1 300000 >&2", "timeout_sec": 60})).await;
    assert_eq!(r["status"], "success", "{r:#?}");
    let stdout = PathBuf::from(r["fullStdoutPath"].as_str().expect("a path"));
    let dir = stdout.parent().expect("a directory").to_owned();
    let cut = |path: &Path| {
        let text = std::fs::read_to_string(path).expect("read");
        let at = text.find("\n[shellkeep: the full output stops here").map(|at| text.len() - at);
        (text.len() as u64, at.unwrap_or(0) as u64)
    };
    let files = output_files(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let (mut data, mut cut_lines) = (0, 0);
    for (path, _) in &files {
        let (len, cut_line) = cut(path);
        data += len - cut_line;
        cut_lines += u64::from(cut_line > 0);
    }
    assert_eq!(data, 1 << 20, "{files:?}");
    assert!(cut_lines >= 1, "a stream that reached the limit says so: {files:?}");
    assert!(r["fullStdoutCut"].is_string() || r["fullStderrCut"].is_string(), "{r:#?}");

    let r = server.terminal(json!({"command": "seq 1 400000", "timeout": 60})).await;
    let path = PathBuf::from(r["full_output_path"].as_str().expect("a path"));
    let (len, cut_line) = cut(&path);
    assert_eq!(len - cut_line, 1 << 20);
    assert!(r["full_output_cut"].as_str().is_some_and(|c| c.contains("limit per command")));
    assert_eq!(output_files(&dir).len(), 3, "one more file");
}

/// `run` outputs are kept like a session's commands: the newest ones, by
/// `--output-keep-commands`; an older one is refused by name, and its files
/// are deleted.
#[tokio::test]
async fn run_outputs_are_kept_by_the_store_retention() {
    let server = Server::with(&["--output-cap", "200", "--output-keep-commands", "2"]).await;
    let mut paths = Vec::new();
    for n in 1..=3u64 {
        let r = server.run(json!({"command": format!("seq 1 {}", 5000 + n)})).await;
        let call: &Value = &r["stdoutOutputCall"];
        assert_eq!(call["run"].as_u64(), Some(n), "{r:#?}");
        paths.push(PathBuf::from(r["fullStdoutPath"].as_str().expect("a path")));
    }
    let gone = server.call("output", json!({"run": 1})).await;
    assert!(gone.is_error, "{gone:#?}");
    assert!(gone.text.contains("run 1 is not kept") && gone.text.contains("runs 2 to 3"));
    assert!(!paths[0].exists(), "run 1's file is deleted");
    for n in [2u64, 3] {
        let text = read_run(&server, n, "stdout", 0).await;
        assert_eq!(text, numbers(1, 5000 + n), "run {n}");
    }
    assert!(paths[1].exists() && paths[2].exists());
}

/// Issue 14: at the per-command limit, `output` counted lines that were
/// never saved, so `offset: -2` returned nothing and its next offset
/// pointed past the end. The lines and offsets are now those saved, and
/// the page says how much was not saved; in the terminal and for `run`.
#[tokio::test]
async fn at_the_per_command_limit_output_reads_the_lines_saved() {
    let server = Server::with(&["--full-output-max-mib", "1"]).await;
    let full = numbers(1, 300_000);
    let saved = &full[..1 << 20];
    let saved_lines = saved.split_inclusive('\n').count() as u64;
    // The last two lines saved: the second was cut inside, and has no newline.
    let mut last_two: Vec<&str> = saved.split_inclusive('\n').rev().take(2).collect();
    last_two.reverse();
    let last_two = last_two.concat();
    let not_saved = (full.len() - saved.len()) as u64;
    let r = server.terminal(json!({"command": "seq 1 300000", "timeout": 120})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r2 = server.run(json!({"command": "seq 1 300000", "timeout_sec": 120})).await;
    let run = r2["stdoutOutputCall"]["run"].as_u64().expect("the run's number");
    for args in [json!({"offset": -2}), json!({"run": run, "offset": -2})] {
        let page = server.call("output", args.clone()).await;
        assert!(!page.is_error, "{page:#?}");
        assert_eq!(page["lines"], last_two.as_str(), "{args}: {page:#?}");
        assert_eq!(page["total_lines"], saved_lines, "{args}: {page:#?}");
        assert_eq!(page["next_offset"], saved_lines, "{args}: {page:#?}");
        assert_eq!(page["first_line"], saved_lines - 2, "{args}: {page:#?}");
        assert_eq!(page["bytes_not_saved"], not_saved, "{args}: {page:#?}");
        assert!(page["unavailable_from"].is_null(), "{args}: {page:#?}");
        let says = format!("the {not_saved} bytes");
        assert!(page.text.contains(&says) && page.text.contains("were not saved"), "{}", page.text);
        // Nothing past the end: the file's own cut line is not output.
        let past = server
            .call("output", {
                let mut args = args.clone();
                args["offset"] = json!(saved_lines);
                args
            })
            .await;
        assert_eq!(
            (past["line_count"].as_u64(), past["lines"].as_str()),
            (Some(0), Some("")),
            "{past:#?}"
        );
    }
}

/// Issue 14: an `output` page names the command's text on the first page
/// only; later pages say only its number, and every page's structured
/// content has the text.
#[tokio::test]
async fn output_pages_name_the_command_once() {
    let server = Server::start().await;
    let command = "seq 1 500 # a command with a long text that pages need not repeat";
    let r = server.terminal(json!({"command": command})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let first = server.call("output", json!({"offset": 0, "limit": 10})).await;
    assert!(first.text.contains(&format!("[Command 1 ({command:?}) in session")), "{}", first.text);
    for offset in [10, 490] {
        let page = server.call("output", json!({"offset": offset, "limit": 10})).await;
        assert!(!page.text.contains("a command with a long text"), "{}", page.text);
        assert!(page.text.contains("[Command 1 in session \"default\": lines"), "{}", page.text);
        assert_eq!(page["command_text"], command, "{page:#?}");
    }
    let r = server.run(json!({"command": "seq 1 50"})).await;
    let run = r["stdout_output_call"]["run"].as_u64().unwrap_or(1);
    let page = server.call("output", json!({"run": run, "offset": 5, "limit": 5})).await;
    assert!(page.text.contains(&format!("[Run {run}, stdout: lines 5-9")), "{}", page.text);
    assert_eq!(page["command_text"], "seq 1 50", "{page:#?}");
}
