//! `shellkeep verify-timeouts`: runs the timeout policy's four acceptance
//! tests (the seed's, in bash, with limits scaled down so a run takes
//! seconds) through the real runner, and writes the verification document
//! from what actually happened. Nothing in the document is typed by hand.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use shellkeep_engine::{ExplicitTimeout, Policy};
use shellkeep_engine::{RunRequest, run_oneshot};
use tokio_util::sync::CancellationToken;

use crate::render;

/// One acceptance test: what it runs and what the seed expects.
struct Case {
    title: &'static str,
    command: &'static str,
    timeout_sec: f64,
    expected: &'static str,
    check: fn(&render::RunOutput) -> bool,
}

const CASES: &[Case] = &[
    Case {
        title: "Test 1: quick command (success)",
        command: "echo 'timeout test 1'",
        timeout_sec: 30.0,
        expected: "status success, exitCode 0, timeoutReason null, durationMs < 1000",
        check: |r| {
            r.status == "success"
                && r.exit_code == 0
                && r.timeout_reason.is_none()
                && r.duration_ms < 1000
        },
    },
    Case {
        title: "Test 2: hung process (no-output timeout)",
        command: "sleep 600",
        timeout_sec: 8.0,
        expected: "status timeout, timeoutReason no_output_timeout, terminationMode soft or hard, durationMs about 2000 (8 / 4)",
        check: |r| {
            r.status == "timeout"
                && r.timeout_reason == Some("no_output_timeout")
                && r.termination_mode.is_some()
                && (1900..4000).contains(&r.duration_ms)
        },
    },
    Case {
        title: "Test 3: long command (execution timeout)",
        command: "for i in $(seq 1 100); do sleep 0.4; echo 'still running'; done",
        timeout_sec: 3.0,
        expected: "status timeout, timeoutReason exec_timeout, durationMs about 3000, partial output kept",
        check: |r| {
            r.status == "timeout"
                && r.timeout_reason == Some("exec_timeout")
                && (2900..5000).contains(&r.duration_ms)
                && r.stdout.contains("still running")
        },
    },
    Case {
        title: "Test 4: normal long command (success)",
        command: "for i in 1 2 3; do sleep 0.5; echo step $i; done",
        timeout_sec: 30.0,
        expected: "status success, exitCode 0, durationMs < 30000",
        check: |r| r.status == "success" && r.exit_code == 0 && r.duration_ms < 30_000,
    },
];

/// Runs the four tests and writes the document to `output`; returns whether
/// every test met its expectation.
pub(crate) async fn run(policy: &Policy, output: &Path, scratch: &Path) -> anyhow::Result<bool> {
    let mut document = String::new();
    let _ = writeln!(document, "# Terminal timeout verification\n");
    let _ = writeln!(
        document,
        "Written by `shellkeep verify-timeouts` from a real run: shellkeep {}, {} UTC, on {}.\n",
        env!("CARGO_PKG_VERSION"),
        now_utc(),
        std::env::consts::OS,
    );
    let _ = writeln!(
        document,
        "The seed's four tests, in bash, through the `run` tool's engine. Limits are scaled \
         down so the run takes seconds: an explicit `timeout_sec` gives the execution limit, and \
         the no-output limit is min(timeout_sec / 4, 60 s), at least 1 s. Kill: SIGTERM to the \
         process group, SIGKILL after a 5 s grace.\n"
    );
    let mut all_passed = true;
    for (index, case) in CASES.iter().enumerate() {
        let explicit = ExplicitTimeout::try_from(case.timeout_sec)?;
        let decision = policy.decide(case.command, Some(explicit));
        let request =
            RunRequest::new(case.command, decision.limits, scratch, format!("verify-{index}"));
        let outcome = run_oneshot(request, CancellationToken::new()).await;
        let (_, result) = render::run(&outcome, &decision);
        let passed = (case.check)(&result);
        all_passed &= passed;
        let _ = writeln!(document, "## {}\n", case.title);
        let _ = writeln!(
            document,
            "```bash\nshellkeep run --timeout {} -- {}\n```\n",
            case.timeout_sec, case.command
        );
        let _ = writeln!(document, "Expected: {}.\n", case.expected);
        let _ = writeln!(
            document,
            "Limits applied: exec {:?}, no output {:?}.\n",
            decision.limits.exec, decision.limits.no_output
        );
        let _ = writeln!(document, "```json\n{}\n```\n", seed_fields(&result)?);
        let _ = writeln!(document, "Result: **{}**\n", if passed { "PASS" } else { "FAIL" });
    }
    let _ = writeln!(
        document,
        "Overall: **{}**.",
        if all_passed { "all four tests passed" } else { "some tests FAILED" }
    );
    std::fs::write(output, document).map_err(|err| {
        let full = std::path::absolute(output).unwrap_or_else(|_| output.to_owned());
        anyhow::anyhow!("cannot write {}: {err}", full.display())
    })?;
    Ok(all_passed)
}

/// The seed's seven fields, in the seed's order.
fn seed_fields(result: &render::RunOutput) -> anyhow::Result<String> {
    let fields: [(&str, serde_json::Value); 7] = [
        ("status", result.status.into()),
        ("stdout", result.stdout.as_str().into()),
        ("stderr", result.stderr.as_str().into()),
        ("exitCode", result.exit_code.into()),
        ("timeoutReason", result.timeout_reason.into()),
        ("terminationMode", result.termination_mode.into()),
        ("durationMs", result.duration_ms.into()),
    ];
    let mut lines = Vec::new();
    for (name, value) in fields {
        lines.push(format!("  \"{name}\": {}", serde_json::to_string(&value)?));
    }
    Ok(format!("{{\n{}\n}}", lines.join(",\n")))
}

/// The current UTC date and time, `YYYY-MM-DD HH:MM`, without a date crate.
fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}", rest / 3600, rest % 3600 / 60)
}
