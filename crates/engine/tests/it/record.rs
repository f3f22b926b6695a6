//! Recordings of a real shell whose terminal a person types into: keys
//! typed while the terminal echoed them are recorded (masked), keys typed
//! with echo off (a password) are not, only a marker that some were; the
//! agent's commands are markers and `$ command` lines; the file ends with
//! the shell.

use std::sync::Arc;
use std::time::Duration;

use shellkeep_engine::Outcome;
use shellkeep_engine::Secrets;
use shellkeep_engine::{DEFAULT_IDLE_LIMIT, RecordSettings, Recorder};
use shellkeep_engine::{Retention, SpillLimits, server_prefix};

use crate::{Term, eventually, poll_until};

/// A secret of the session, typed by the person with echo on.
const SECRET: &str = "typed-Secret-4411";

/// The events of a recording (after its header).
fn events(text: &str) -> Vec<(f64, String, String)> {
    text.lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect()
}

/// The data of the events with `code`, joined.
fn joined(events: &[(f64, String, String)], code: &str) -> String {
    events.iter().filter(|(_, c, _)| c == code).map(|(_, _, d)| d.as_str()).collect()
}

#[tokio::test]
async fn a_persons_keys_are_recorded_only_when_echoed() {
    let casts = crate::Scratch::new("record-casts");
    let settings = RecordSettings {
        dir: casts.0.join("casts"),
        limits: SpillLimits::default(),
        retention: Retention::default(),
        idle_limit: DEFAULT_IDLE_LIMIT,
    };
    let recorder = Recorder::new(settings, &server_prefix().expect("prefix"));
    let secrets = Arc::new(Secrets::new([("TOKEN".to_owned(), SECRET.to_owned())], false));
    let term = Term::with("record-keys", |config| {
        config.record = Some(Arc::clone(&recorder));
        config.secrets = secrets;
    })
    .await;
    let asks = "read -r -s -p 'Password: ' pw; echo; read -r -p 'Name: ' name; \
                echo \"${#pw} and $name\"";
    let waiting = term.run_for(asks, 5.0).await;
    assert_eq!(waiting.outcome, Outcome::WaitingForInput { shell_reading: true }, "{waiting:#?}");
    let terminal = term.session.terminal().expect("a terminal");
    let hold = term.session.hold().expect("nobody holds it");
    assert!(terminal.hides_input());
    term.session.type_keys(&hold, b"hunter2-password\r").await.expect("typed");
    // The second `read` echoes what it reads.
    eventually(|| !terminal.hides_input()).await;
    term.session.type_keys(&hold, format!("Bob {SECRET}\r").as_bytes()).await.expect("typed");
    drop(hold);
    let done = poll_until(async || term.run_for("", 5.0).await, |r| !r.is_running()).await;
    assert_eq!(done.exit_code(), Some(0), "{done:#?}");
    drop(terminal);
    term.session.close().await;
    assert!(recorder.wait_idle(Duration::from_secs(20)), "the writer did not end");

    let files: Vec<_> = std::fs::read_dir(casts.0.join("casts"))
        .expect("the recordings")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cast"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("read");
    assert!(!text.contains("hunter2") && !text.contains(SECRET), "{text}");
    let events = events(&text);
    assert_eq!(joined(&events, "i"), "Bob <secret-hidden>\r");
    let markers: Vec<&str> =
        events.iter().filter(|(_, c, _)| c == "m").map(|(_, _, d)| d.as_str()).collect();
    // The end is the reader's hang-up or the close, whichever came first.
    assert_eq!(markers[..2], [asks, "input typed with echo off: not recorded"], "{markers:?}");
    assert!(markers.len() == 3 && markers[2].starts_with("the shell ended"), "{markers:?}");
    let output = joined(&events, "o");
    assert!(output.starts_with(&format!("$ {asks}\r\n")), "{output:?}");
    assert!(output.contains("16 and Bob <secret-hidden>"), "{output:?}");
}
