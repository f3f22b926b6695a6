//! Skipping a test for a missing program, which `CI=true` turns into a
//! failure; shared by the engine's and the server's integration tests.

/// Whether the tests run in CI (`CI=true`, as CI services set it). CI
/// installs every program the tests run (`.ci/run`), so there a test never
/// skips: it fails instead, naming what is missing.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Whether `program` is on the tests' `PATH`. When it is not, the caller
/// skips what needs it, and this says so; under `CI=true` it fails the
/// test instead, naming the program.
#[track_caller]
pub fn installed(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    if !found {
        skipping(&format!("`{program}` is not installed"));
    }
    found
}

/// Says why a test skips (part of) what it checks; under `CI=true` it
/// fails with that reason instead, so a missing program never passes for
/// a passing test there.
#[track_caller]
pub fn skipping(why: &str) {
    assert!(
        !in_ci(),
        "CI=true, so no test may skip, but {why} (.ci/run installs what the tests run)"
    );
    eprintln!("skipped: {why}");
}

/// Says why a test skips (part of) what it checks because this host's
/// kernel forbids the attack it makes (`what`, with `evidence`: the
/// setting or the error that shows it, such as legacy `TIOCSTI` switched
/// off). A protection of the host is a reason to skip, not something
/// missing, so it skips under `CI=true` too; a caller must have seen the
/// kernel refuse, not merely failed to try.
pub fn kernel_forbids(what: &str, evidence: &str) {
    eprintln!("skipped: this host's kernel forbids {what} ({evidence})");
}
