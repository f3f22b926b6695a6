//! The server's log: tracing to stderr at the level `SHELLKEEP_LOG` sets,
//! every line masked with the server's secrets once they are known, and the
//! same masks for what has no handle on the configuration (the wire's own
//! errors).
//!
//! Not for: replies (masked through `render::mask` with their session's
//! secrets). Holds: no log line carries a registered secret.

use std::io::Write;
use std::sync::Arc;

use crate::render;

/// Logs to stderr, at the level `SHELLKEEP_LOG` sets (default: warnings),
/// each line masked with the server's secrets once they are known
/// ([`LOG_MASKS`]).
pub(crate) fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHELLKEEP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(|| MaskedStderr(Vec::new()))
        .with_ansi(false)
        .init();
}

/// The server's secrets for what has no handle on its configuration: the
/// log (the debug log names every request with its arguments) and the
/// wire's own errors (which quote parameters that do not parse). Set once
/// the configuration is read, before anything is served.
pub(crate) static LOG_MASKS: std::sync::OnceLock<Arc<shellkeep_engine::Secrets>> =
    std::sync::OnceLock::new();

/// `text` masked with the server's secrets (as it is before they are
/// known).
pub(crate) fn masked(text: &str) -> String {
    match LOG_MASKS.get() {
        Some(masks) => render::mask(masks, text),
        None => text.to_owned(),
    }
}

/// One log event, collected and written to stderr masked, in one write,
/// when the formatter drops it.
pub(crate) struct MaskedStderr(Vec<u8>);

impl Write for MaskedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for MaskedStderr {
    fn drop(&mut self) {
        let text = masked(&String::from_utf8_lossy(&self.0));
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}
