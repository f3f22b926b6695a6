//! What every benchmark of this crate shares: the `main` that runs its
//! async body on a current-thread runtime and turns a failure into a
//! message and a non-zero exit. `cargo bench` passes `--bench` (and any
//! filter); there is nothing to select, so the arguments are ignored.

#[allow(dead_code, reason = "each benchmark uses the helpers it needs")]
pub(crate) mod calls;
#[allow(dead_code, reason = "each benchmark uses the helpers it needs")]
pub(crate) mod measure;

use std::future::Future;
use std::process::ExitCode;

/// Runs `body` to its end; `name` names the benchmark in what it prints.
pub(crate) fn main(name: &str, body: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{name} bench: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(body) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name} bench failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}
