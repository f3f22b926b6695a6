//! Tests of the one-shot runner against real bash: the seed's four cases,
//! both limits, the grace period, leftovers, the shared cap, cancel and the
//! guard.

use super::*;
use crate::output::Stream;
use std::path::Path;

/// A directory for spill files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir()
            .join(format!("shellkeep-oneshot-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A silence limit that outlasts bash's start even on a busy machine,
/// for commands that must print or set a trap before it strikes.
const STARTED: f64 = 2.0;

fn limits(exec_secs: f64, no_output_secs: f64) -> Limits {
    Limits {
        exec: Duration::from_secs_f64(exec_secs),
        no_output: Duration::from_secs_f64(no_output_secs),
    }
}

fn request(dir: &TempDir, command: &str, limits: Limits) -> RunRequest {
    RunRequest {
        grace: Duration::from_millis(300),
        ..RunRequest::new(command, limits, &dir.0, "run")
    }
}

async fn run_now(request: RunRequest) -> RunOutcome {
    run(request, CancellationToken::new()).await
}

/// The parts of an outcome that do not vary between runs, on one line.
fn summary(outcome: &RunOutcome) -> String {
    format!(
        "{} exit={} reason={} mode={} cancelled={} leftovers={} stdout={:?} stderr={:?}",
        outcome.status().as_str(),
        outcome.exit_code(),
        outcome.timeout_reason().map_or("-", TimeoutReason::as_str),
        outcome.termination_mode().map_or("-", TerminationMode::as_str),
        outcome.cancelled(),
        outcome.stopped_leftovers(),
        outcome.stdout.text,
        outcome.stderr.text,
    )
}

/// Extra time allowed above every upper bound: tests share two cores
/// with the rest of the suite, and speed is measured by the benchmark,
/// not here. The bounds only tell which limit fired.
const LOAD_SLACK: f64 = 2.0;

fn assert_duration(outcome: &RunOutcome, at_least: f64, below: f64) {
    let below = below + LOAD_SLACK;
    let secs = outcome.duration.as_secs_f64();
    assert!(at_least <= secs && secs < below, "took {secs:.3} s, expected {at_least}..{below}");
}

/// Asserts the command's process group has no live member left.
fn assert_group_gone(outcome: &RunOutcome) {
    let pgid = outcome.pgid.expect("the command started");
    assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn seed_1_a_quick_command_succeeds() {
    let dir = TempDir::new("seed1");
    let outcome = run_now(request(&dir, "echo 'timeout test 1'", limits(30.0, 10.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="timeout test 1\n" stderr="""#
    );
    assert_duration(&outcome, 0.0, 1.0);
    assert_eq!(outcome.limits, limits(30.0, 10.0));
}

#[tokio::test]
async fn seed_2_a_silent_command_hits_the_no_output_limit() {
    let dir = TempDir::new("seed2");
    let outcome = run_now(request(&dir, "sleep 600", limits(5.0, 0.5))).await;
    assert_eq!(
        summary(&outcome),
        r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="" stderr="""#
    );
    assert_duration(&outcome, 0.5, 1.2);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn seed_3_a_chatty_command_hits_the_exec_limit_and_keeps_its_output() {
    let dir = TempDir::new("seed3");
    let command = "for i in $(seq 1 100); do echo \"still running $i\"; sleep 0.2; done";
    let outcome = run_now(request(&dir, command, limits(3.0, STARTED))).await;
    assert_eq!(
        (
            outcome.status(),
            outcome.exit_code(),
            outcome.timeout_reason(),
            outcome.termination_mode()
        ),
        (RunStatus::Timeout, -1, Some(TimeoutReason::Exec), Some(TerminationMode::Soft))
    );
    assert!(outcome.stdout.text.starts_with("still running 1\nstill running 2\n"));
    let lines = outcome.stdout.text.lines().count();
    // At most one line per 0.2 s sleep, however busy the machine.
    assert!((2..=16).contains(&lines), "{:?}", outcome.stdout.text);
    assert_duration(&outcome, 3.0, 3.8);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn seed_4_a_longer_command_that_finishes_in_time_succeeds() {
    let dir = TempDir::new("seed4");
    let outcome = run_now(request(&dir, "sleep 0.3; echo done", limits(2.0, 1.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="done\n" stderr="""#
    );
    assert_duration(&outcome, 0.3, 1.5);
}

#[tokio::test]
async fn stderr_is_kept_apart_and_a_failing_exit_code_is_still_success() {
    let dir = TempDir::new("stderr");
    let outcome = run_now(request(&dir, "echo out; echo err >&2; exit 3", limits(5.0, 2.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=3 reason=- mode=- cancelled=false leftovers=false stdout="out\n" stderr="err\n""#
    );
}

#[tokio::test]
async fn death_by_a_signal_we_did_not_send_is_128_plus_the_signal() {
    let dir = TempDir::new("signal");
    let outcome = run_now(request(&dir, "echo before; kill -9 $$", limits(5.0, 2.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=137 reason=- mode=- cancelled=false leftovers=false stdout="before\n" stderr="""#
    );
}

#[tokio::test]
async fn stdin_text_is_read_and_without_it_stdin_is_empty() {
    let dir = TempDir::new("stdin");
    let with_text = RunRequest {
        stdin: Some("hello\nwörld\n".into()),
        ..request(&dir, "cat; echo end", limits(5.0, 2.0))
    };
    let outcome = run_now(with_text).await;
    assert_eq!(outcome.stdout.text, "hello\nwörld\nend\n");
    let outcome = run_now(request(&dir, "cat; echo end", limits(5.0, 2.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="end\n" stderr="""#
    );
}

#[tokio::test]
async fn stdin_a_command_never_reads_does_not_block_the_run() {
    let dir = TempDir::new("stdin-unread");
    let big = RunRequest {
        stdin: Some("x".repeat(1 << 20)),
        ..request(&dir, "echo ignored", limits(5.0, 2.0))
    };
    let outcome = run_now(big).await;
    assert_eq!((outcome.status(), outcome.stdout.text.as_str()), (RunStatus::Success, "ignored\n"));
    assert_duration(&outcome, 0.0, 2.0);
}

#[tokio::test]
async fn env_cwd_and_terminal_settings_reach_the_command() {
    let dir = TempDir::new("env");
    let with_env = RunRequest {
        env: vec![("SHELLKEEP_TEST".into(), "yes".into()), ("PAGER".into(), "less".into())],
        cwd: Some(dir.0.clone()),
        ..request(&dir, "echo \"$TERM $NO_COLOR $SHELLKEEP_TEST $PAGER $(pwd)\"", limits(5.0, 2.0))
    };
    let outcome = run_now(with_env).await;
    let cwd = dir.0.canonicalize().expect("canonical temp dir");
    assert_eq!(outcome.stdout.text, format!("dumb 1 yes less {}\n", cwd.display()));
}

#[tokio::test]
async fn output_in_the_grace_period_is_kept() {
    let dir = TempDir::new("grace-output");
    let command = "trap 'echo caught TERM; exit 3' TERM; echo started; sleep 600 & wait";
    // The silence limit must outlast bash's start on a busy machine, or
    // SIGTERM comes before the trap; the grace, its answer.
    let patient = RunRequest {
        grace: Duration::from_secs(5),
        ..request(&dir, command, limits(30.0, STARTED))
    };
    let outcome = run_now(patient).await;
    assert_eq!(
        summary(&outcome),
        r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\ncaught TERM\n" stderr="""#
    );
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let dir = TempDir::new("hard");
    let outcome = run_now(request(&dir, "trap '' TERM; sleep 600", limits(30.0, STARTED))).await;
    assert_eq!(
        summary(&outcome),
        r#"timeout exit=-1 reason=no_output_timeout mode=hard cancelled=false leftovers=false stdout="" stderr="""#
    );
    // The silence limit, then the whole grace, then SIGKILL.
    assert_duration(&outcome, STARTED + 0.3, STARTED + 1.0);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn background_grandchildren_die_with_the_command() {
    let dir = TempDir::new("grandchildren");
    let command = "sleep 300 & sleep 300 & echo started; wait";
    let outcome = run_now(request(&dir, command, limits(30.0, STARTED))).await;
    assert_eq!(
        summary(&outcome),
        r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\n" stderr="""#
    );
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_daemonised_subshell_dies_with_the_command() {
    let dir = TempDir::new("subshell");
    let command = "(sleep 300 &); echo started; sleep 100";
    let outcome = run_now(request(&dir, command, limits(30.0, STARTED))).await;
    assert_eq!(
        summary(&outcome),
        r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\n" stderr="""#
    );
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn what_a_finished_command_leaves_running_is_stopped() {
    let dir = TempDir::new("leftovers");
    // The background sleep holds stdout open, so without stopping it the
    // run would wait for it.
    let outcome = run_now(request(&dir, "sleep 300 & echo hi", limits(30.0, 10.0))).await;
    assert_eq!(
        summary(&outcome),
        r#"success exit=0 reason=- mode=- cancelled=false leftovers=true stdout="hi\n" stderr="""#
    );
    assert_duration(&outcome, 0.0, 1.0);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn output_beyond_the_cap_is_cut_and_complete_in_its_log() {
    let dir = TempDir::new("spill");
    let capped = RunRequest {
        stream_cap: 100,
        ..request(&dir, "seq 1 10000; echo oops >&2", limits(10.0, 5.0))
    };
    let store = Arc::clone(&capped.output);
    let outcome = run_now(capped).await;
    let full: String = (1..=10000).map(|i| format!("{i}\n")).collect();
    assert_eq!(outcome.status(), RunStatus::Success);
    assert!(outcome.stdout.truncated);
    assert!(outcome.stdout.text.starts_with("1\n2\n3\n"), "{}", outcome.stdout.text);
    assert!(outcome.stdout.text.ends_with("9999\n10000\n"), "{}", outcome.stdout.text);
    // Cut on line boundaries: what is shown and what is left out make
    // the whole.
    let (head, tail) = outcome.stdout.text.split_once("[... ").expect("an omission line");
    let tail = tail.split_once(" ...]\n").expect("its end").1;
    assert_eq!(head.len() + tail.len() + outcome.stdout.omitted_chars as usize, full.len());
    let spill = outcome.stdout.full_output_path.as_ref().expect("saved");
    let name = spill.file_name().expect("name").to_string_lossy().into_owned();
    assert!(name.starts_with("run-1-") && name.ends_with(".stdout"), "{name}");
    assert_eq!(std::fs::read_to_string(spill).expect("log file"), full);
    // stderr's "oops\n" takes 6 of the 100 characters the two streams
    // share, as JSON writes them (a newline is `\n`): the head has room
    // for 47, lines 1 to 14 whole; "15", the line (0-based: 14) where
    // the text left out begins, is not cut.
    assert_eq!(outcome.stdout.lines_before_omission, 14);
    assert!(outcome.stdout.text.contains("13\n14\n[... "), "{}", outcome.stdout.text);
    // The store reads the whole stream back, and the run is over.
    let log = store.get_stream(Some(outcome.number), Stream::Stdout).expect("kept");
    let page = log.read(19, 5000).expect("read");
    let from_20: String = (20..=5019).map(|i| format!("{i}\n")).collect();
    assert!(page.text == from_20, "{} lines from {}", page.lines, page.first_line);
    assert_eq!((page.total_lines, page.running, page.exit_code), (10_000, false, Some(0)));
    assert_eq!(log.read(-1, 1).expect("read").text, "10000\n");
    // The short stream is whole, kept in memory, and no file was made.
    assert_eq!((outcome.stderr.text.as_str(), outcome.stderr.truncated), ("oops\n", false));
    let err = store.get_stream(Some(outcome.number), Stream::Stderr).expect("kept");
    assert_eq!((err.read(0, 10).expect("read").text, err.path()), ("oops\n".to_owned(), None));
    assert_eq!(std::fs::read_dir(&dir.0).expect("dir").count(), 1, "one file: stdout's");
}

/// Issue 18: stdout and stderr share one cap, counted as JSON writes
/// them; a quiet stream leaves its part to the other.
#[tokio::test]
async fn the_two_streams_share_one_cap() {
    let dir = TempDir::new("share");
    let own = |shown: &Shown| {
        let notice = shown.omission.clone().map_or("", |range| &shown.text[range]);
        output::json_chars(&shown.text) - output::json_chars(notice)
    };
    let both = "seq 1 20000; seq 1 20000 >&2; printf '\\\"\\001%.0s' $(seq 500) >&2";
    let capped = RunRequest { stream_cap: 2_000, ..request(&dir, both, limits(10.0, 5.0)) };
    let outcome = run_now(capped).await;
    assert!(outcome.stdout.truncated && outcome.stderr.truncated);
    assert!(own(&outcome.stdout) + own(&outcome.stderr) <= 2_000);
    assert!(own(&outcome.stdout) > 900 && own(&outcome.stderr) > 900);
    assert!(outcome.stderr.full_output_path.is_some(), "{:?}", outcome.stderr);
    assert!(outcome.stderr.text.ends_with("\"\u{1}"), "{:?}", outcome.stderr.text);
    let quiet = "seq 1 20000; echo oops >&2";
    let capped = RunRequest { stream_cap: 2_000, ..request(&dir, quiet, limits(10.0, 5.0)) };
    let outcome = run_now(capped).await;
    assert_eq!(outcome.stderr.text, "oops\n");
    assert!((1_900..=1_994).contains(&own(&outcome.stdout)), "{}", own(&outcome.stdout));
}

#[tokio::test]
async fn a_character_split_between_writes_is_decoded_whole() {
    let dir = TempDir::new("utf8");
    let command =
        r"printf 'caf\xc3'; sleep 0.2; printf '\xa9 \xe2\x82'; sleep 0.2; printf '\xac \xff\n'";
    let outcome = run_now(request(&dir, command, limits(5.0, 2.0))).await;
    assert_eq!(outcome.stdout.text, "café € \u{FFFD}\n");
}

#[tokio::test]
async fn a_missing_cwd_is_an_error_that_says_what_to_do() {
    let dir = TempDir::new("nocwd");
    let missing = dir.0.join("nope");
    let bad_cwd =
        RunRequest { cwd: Some(missing.clone()), ..request(&dir, "true", limits(5.0, 2.0)) };
    let outcome = run_now(bad_cwd).await;
    let expected = format!(
        "the working directory {} does not exist; choose an existing directory",
        missing.display()
    );
    assert_eq!(
        summary(&outcome),
        format!(
            "error exit=-1 reason=- mode=- cancelled=false leftovers=false stdout=\"\" stderr={expected:?}"
        )
    );
    assert_eq!(outcome.pgid, None);
}

#[tokio::test]
async fn cancelling_the_request_stops_the_command_quickly() {
    let dir = TempDir::new("cancel");
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    // Cancel as soon as the command is known to be running: when it says
    // its marked sleep started, through a FIFO (opened for reading and
    // writing, so it never reads as ended before the command writes).
    let ready = dir.0.join("ready");
    nix::unistd::mkfifo(&ready, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let mut said = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&ready)
        .expect("the FIFO opens");
    tokio::spawn(async move {
        let mut line = [0u8; 1];
        let heard = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read(&mut said, &mut line),
        )
        .await;
        assert!(matches!(heard, Ok(Ok(1))), "the command never said it started: {heard:?}");
        canceller.cancel();
    });
    let command = format!("echo started; sleep 300.4242 & echo > {}; wait", ready.display());
    let outcome = run(request(&dir, &command, limits(60.0, 60.0)), cancel).await;
    assert_eq!(
        summary(&outcome),
        r#"error exit=-1 reason=- mode=soft cancelled=true leftovers=false stdout="started\n" stderr="""#
    );
    assert_duration(&outcome, 0.0, 2.0);
    assert_group_gone(&outcome);
    assert_eq!(pids_with_argument("300.4242"), Vec::<i32>::new());
}

#[tokio::test]
async fn the_guard_hears_of_the_group_while_it_runs() {
    let dir = TempDir::new("guard");
    let record = dir.0.join("guard-lines");
    let record_arg = record.to_str().expect("utf-8 path");
    let guard = Arc::new(
        Guard::spawn(Path::new("bash"), &["-c", "cat > \"$0\"", record_arg]).expect("guard"),
    );
    let watched =
        RunRequest { guard: Some(guard.clone()), ..request(&dir, "true", limits(5.0, 2.0)) };
    let outcome = run_now(watched).await;
    let pgid = outcome.pgid.expect("started");
    let guard = Arc::into_inner(guard).expect("the run let go of the guard");
    assert!(guard.shutdown(Duration::from_secs(10)).is_some());
    let lines = std::fs::read_to_string(&record).expect("recorded lines");
    assert_eq!(lines, format!("+g {pgid}\n-g {pgid}\nend\n"));
}

/// Pids of live processes with `argument` among their arguments.
fn pids_with_argument(argument: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline.split(|&b| b == 0).any(|arg| arg == argument.as_bytes())
            })
        })
        .filter(|pid| {
            // A killed process can linger as a zombie; it is dead all the same.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')
            })
        })
        .collect()
}
