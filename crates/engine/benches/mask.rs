//! The cost of secret masking, measured in the engine: the same commands
//! with nothing to mask and with [`SECRETS`] registered secrets and the
//! shapes of well-known credentials on.
//!
//! Run it with `cargo bench -p shellkeep-engine --bench mask`. It measures,
//! alternating the two settings round by round so that both see the same
//! load:
//! 1. `seq 1 2000000` in a warm terminal session (wall time of the call);
//! 2. `seq 1 2000000` through `run`;
//! 3. the `echo hi` round trip in a warm session (p50 over [`ECHO_CALLS`]);
//! 4. the masker alone over `seq 1 2000000`'s text in 64 KiB pieces.
//!
//! The server's flags for secrets are not used here: the engine is given
//! the secrets directly, which is what those flags come down to.
//! `MASK_ALONE=1` measures only the masker, with values, shapes and both.
#![allow(clippy::print_stdout, reason = "a benchmark's report is its output")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use shellkeep_engine::PolicyLimits as Limits;
use shellkeep_engine::{Call, Request, Session, SessionConfig};
use shellkeep_engine::{RunRequest, run_oneshot};
use shellkeep_engine::{Secrets, StreamMasker};
use tokio_util::sync::CancellationToken;

/// Registered secrets in the masked setting.
const SECRETS: usize = 100;

/// Rounds of each measurement per setting.
const ROUNDS: usize = 7;

/// `echo hi` calls timed per round.
const ECHO_CALLS: usize = 300;

const SEQ: &str = "seq 1 2000000";

/// `SECRETS` values of 32 characters, each a different mix (no randomness
/// needed: the masker's cost does not depend on the letters).
fn secrets(on: bool) -> Arc<Secrets> {
    if !on {
        return Arc::new(Secrets::none());
    }
    let values = (0..SECRETS).map(|i| {
        let value: String =
            (0..32).map(|j| (b'A' + ((i * 7 + j * 13) % 26) as u8) as char).collect();
        (format!("SECRET_{i}"), format!("{value}{i}"))
    });
    Arc::new(Secrets::new(values, true))
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

async fn session(dir: &std::path::Path, on: bool) -> Session {
    let name = if on { "masked" } else { "plain" };
    let mut config = SessionConfig::new(
        name,
        dir.to_path_buf(),
        dir.join(format!("{name}-private")),
        dir.join("spill"),
    );
    config.user_rc = None;
    config.secrets = secrets(on);
    let session = Session::new(config);
    session.start().await.expect("the shell starts");
    session
}

async fn call(session: &Session, command: &str) -> Duration {
    let request =
        Request { timeout: Some(Duration::from_secs(60)), ..Request::new(Call::run(command)) };
    let start = Instant::now();
    let reply = session.execute(request, CancellationToken::new()).await.expect("the call");
    let took = start.elapsed();
    assert!(!reply.is_running(), "{reply:?}");
    took
}

fn alone(secrets: &Secrets, text: &str) -> Duration {
    let mut masker = StreamMasker::new();
    let start = Instant::now();
    let mut out = 0;
    let mut at = 0;
    while at < text.len() {
        let end = (at + 65_536).min(text.len());
        out += masker.push(secrets, &text[at..end], false).0.len();
        at = end;
    }
    out += masker.push(secrets, "", true).0.len();
    assert_eq!(out, text.len());
    start.elapsed()
}

fn main() {
    if std::env::var_os("MASK_ALONE").is_some() {
        let text: String = (1..=2_000_000).map(|n| format!("{n}\n")).collect();
        let values: Vec<(String, String)> = (0..SECRETS)
            .map(|i| {
                let value: String =
                    (0..32).map(|j| (b'A' + ((i * 7 + j * 13) % 26) as u8) as char).collect();
                (format!("SECRET_{i}"), format!("{value}{i}"))
            })
            .collect();
        for (name, secrets) in [
            ("values", Secrets::new(values.clone(), false)),
            ("shapes", Secrets::new([], true)),
            ("both", Secrets::new(values, true)),
        ] {
            let times: Vec<Duration> = (0..5).map(|_| alone(&secrets, &text)).collect();
            println!("{name}: {:?}", median(times));
        }
        return;
    }
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let dir = std::env::temp_dir().join(format!("shellkeep-mask-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sessions = [session(&dir, false).await, session(&dir, true).await];
    let mut terminal = [Vec::new(), Vec::new()];
    let mut run = [Vec::new(), Vec::new()];
    let mut echo = [Vec::new(), Vec::new()];
    let mut alone = [Vec::new(), Vec::new()];
    let text: String = (1..=2_000_000).map(|n| format!("{n}\n")).collect();
    for round in 0..=ROUNDS {
        for on in [false, true] {
            let i = usize::from(on);
            let session = &sessions[i];
            let seq = call(session, SEQ).await;
            let limits =
                Limits { exec: Duration::from_secs(60), no_output: Duration::from_secs(60) };
            let request =
                RunRequest { secrets: secrets(on), ..RunRequest::new(SEQ, limits, &dir, "run") };
            let start = Instant::now();
            let outcome = run_oneshot(request, CancellationToken::new()).await;
            let ran = start.elapsed();
            assert_eq!(outcome.exit_code(), 0);
            for _ in 0..20 {
                call(session, "echo hi").await;
            }
            let mut times: Vec<Duration> = Vec::new();
            for _ in 0..ECHO_CALLS {
                times.push(call(session, "echo hi").await);
            }
            let masker_secrets = secrets(on);
            let mut masker = StreamMasker::new();
            let start = Instant::now();
            let mut out = 0;
            let mut at = 0;
            while at < text.len() {
                let end = (at + 65_536).min(text.len());
                out += masker.push(&masker_secrets, &text[at..end], false).0.len();
                at = end;
            }
            out += masker.push(&masker_secrets, "", true).0.len();
            assert_eq!(out, text.len());
            let masked_alone = start.elapsed();
            if round == 0 {
                continue; // warm-up
            }
            terminal[i].push(seq);
            run[i].push(ran);
            echo[i].push(median(times));
            alone[i].push(masked_alone);
        }
    }
    println!(
        "| measurement (median of {ROUNDS} rounds) | no secrets | {SECRETS} secrets and shapes | ratio |"
    );
    println!("| --- | --- | --- | --- |");
    for (name, values) in [
        ("terminal `seq 1 2000000`", &terminal),
        ("`run` `seq 1 2000000`", &run),
        ("terminal `echo hi`, p50 per round", &echo),
        ("the masker alone over `seq 1 2000000`'s text", &alone),
    ] {
        let (plain, masked) = (median(values[0].clone()), median(values[1].clone()));
        let ratio = masked.as_secs_f64() / plain.as_secs_f64().max(1e-9);
        println!("| {name} | {} | {} | {ratio:.3} |", ms(plain), ms(masked));
    }
    for session in &sessions {
        session.close().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
