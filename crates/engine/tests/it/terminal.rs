//! The terminal session: persistence, completion, input, keys, shell death.

use shellkeep_engine::session::{Note, Status, WaitEnded};

use crate::Term;

#[tokio::test]
async fn echo_and_exit_codes() {
    let term = Term::new("echo").await;
    let reply = term.run("echo hi").await;
    assert_eq!(reply.output.text, "hi\n");
    assert_eq!((reply.status, reply.exit_code), (Status::Completed, Some(0)));
    assert_eq!(reply.cwd, term.cwd());
    let reply = term.run("false").await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code), ("", Some(1)));
    term.session.close().await;
}
