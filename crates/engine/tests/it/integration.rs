//! The shell integration survives what commands do to the shell: `exec
//! bash`, nested shells, `PROMPT_COMMAND=`, `set -x`, `stty`; commands
//! behave as if typed at a prompt; incomplete input waits for the rest.

use shellkeep_engine::session::{Note, Status};

use crate::Term;

#[tokio::test]
async fn scratch_debug() {
    let term = Term::new("scratch").await;
    let reply = term.run_for("python3 -c \"x=input('name? '); print('hello', x)\"", 0.5).await;
    eprintln!("{reply:#?}");
    let reply = term.input("Bob", 10.0).await;
    eprintln!("{reply:#?}");
    let _ = (Note::Reset, Status::Completed);
    term.session.close().await;
}
