//! Watching a started one-shot command to its end: both pipes read and
//! decoded into their sinks, the two deadlines (the whole run and the
//! silence since the last byte), the caller's cancel, and the stopping of
//! everything the run owns (SIGTERM, a grace period, SIGKILL) while the
//! pipes are still read, so what a SIGTERM handler prints is kept.
//!
//! Not here: starting the command (`launch`) or turning what was seen into
//! an outcome (the parent module).
//!
//! Invariant: when the main process exits on its own, whatever it left
//! running is stopped too; a run dropped before its end ([`GroupWatch`])
//! kills what it started.

use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::launch::Launched;
use super::{RunRequest, TimeoutReason, finish_sink};
use crate::guard::Guard;
use crate::output::OutputSink;
use crate::output::Shown;
use crate::process::{self, Targets, TerminationMode};
use crate::utf8::Utf8Decoder;

/// How long the pipes are read after the command's group is gone. A
/// process that left the group (with `setsid`, say) can hold a pipe open for
/// ever; its output after this is not waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Bytes read from a pipe at a time.
const READ_CHUNK: usize = 8 * 1024;

/// Why we stopped the command's process group ourselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunStop {
    /// A limit fired.
    Limit(TimeoutReason),
    /// The caller cancelled the request.
    Cancelled,
    /// The main process exited and left others running in its group.
    Leftovers,
}

/// What [`watch_run`] saw happen.
pub(super) struct Ending {
    /// The main process's exit status, if it was collected.
    pub(super) exit: Option<ExitStatus>,
    /// Why we stopped the group, if we did.
    pub(super) stop: Option<RunStop>,
    /// How the group went away when we stopped it (`None`: nothing was
    /// alive any more when we came to it).
    pub(super) kill: Option<TerminationMode>,
}

/// The stopping of the group, while it is under way.
type Stopping = Pin<Box<dyn Future<Output = Option<TerminationMode>> + Send>>;

/// The command's two output streams.
pub(super) struct Streams {
    stdout: Stream<tokio::process::ChildStdout>,
    stderr: Stream<tokio::process::ChildStderr>,
}

impl Streams {
    /// The child's two pipes, each into its sink.
    pub(super) fn new(
        child: &mut tokio::process::Child,
        stdout: OutputSink,
        stderr: OutputSink,
    ) -> Streams {
        Streams {
            stdout: Stream::new(child.stdout.take(), stdout),
            stderr: Stream::new(child.stderr.take(), stderr),
        }
    }

    /// Ends both logs with the run's `exit_code`; what stdout and stderr
    /// show.
    pub(super) fn finish(self, exit_code: i32) -> (Shown, Shown) {
        (self.stdout.finish(exit_code), self.stderr.finish(exit_code))
    }

    /// Whether both pipes reached their end.
    fn closed(&self) -> bool {
        self.stdout.is_closed() && self.stderr.is_closed()
    }
}

/// Watches the running command until it has exited and its output is
/// collected: reads both pipes, enforces the limits and `cancel`, and stops
/// the process group when needed.
///
/// Everything happens in one `select!` over events (bytes arriving, the
/// child exiting, a deadline, a cancel, the kill finishing), so there is no
/// polling, and the pipes are read while the group is being stopped. Each
/// event's handling is a step of [`Watch`].
pub(super) async fn watch_run(
    launched: &mut Launched,
    request: &RunRequest,
    cancel: &CancellationToken,
    streams: &mut Streams,
) -> Ending {
    let limits = request.limits;
    let exec_deadline = tokio::time::sleep_until(deadline_after(limits.exec));
    let silence_deadline = tokio::time::sleep_until(deadline_after(limits.no_output));
    tokio::pin!(exec_deadline, silence_deadline);
    let mut watch = Watch::new(launched.pgid, &launched.targets, request.grace);
    let child = &mut launched.child;
    loop {
        // The limits and the cancel apply while the command runs on its own.
        let running = watch.running();
        let stop = tokio::select! {
            read = streams.stdout.read() => {
                if streams.stdout.absorb(read) && running {
                    silence_deadline.as_mut().reset(deadline_after(limits.no_output));
                }
                None
            }
            read = streams.stderr.read() => {
                if streams.stderr.absorb(read) && running {
                    silence_deadline.as_mut().reset(deadline_after(limits.no_output));
                }
                None
            }
            exit = child.wait(), if watch.ending.exit.is_none() => watch.exited(exit),
            () = &mut exec_deadline, if running => Some(RunStop::Limit(TimeoutReason::Exec)),
            () = &mut silence_deadline, if running => Some(RunStop::Limit(TimeoutReason::NoOutput)),
            () = cancel.cancelled(), if running => Some(RunStop::Cancelled),
            mode = finish(&mut watch.stopping), if watch.stopping.is_some() => {
                watch.stopped(mode, child);
                None
            }
            () = sleep_until_some(watch.drain_deadline), if watch.drain_deadline.is_some() => {
                tracing::debug!(pgid = watch.pgid, "stopped reading output held open by an escaped process");
                break;
            }
        };
        if let Some(stop) = stop {
            watch.stop(stop);
        }
        if watch.collected(streams) {
            break;
        }
    }
    watch.ending
}

/// The state of a watch between events.
struct Watch<'a> {
    /// The command's process group, for the logs.
    pgid: i32,
    /// Everything the run owns, to stop it.
    targets: &'a Targets,
    /// The grace period between SIGTERM and SIGKILL.
    grace: Duration,
    /// What has been seen so far.
    ending: Ending,
    /// The stopping of the group, while it is under way.
    stopping: Option<Stopping>,
    /// Set once the main process has exited and any stopping is done: from
    /// then on only the pipes are read, up to this deadline.
    drain_deadline: Option<Instant>,
}

impl<'a> Watch<'a> {
    fn new(pgid: i32, targets: &'a Targets, grace: Duration) -> Watch<'a> {
        Watch {
            pgid,
            targets,
            grace,
            ending: Ending { exit: None, stop: None, kill: None },
            stopping: None,
            drain_deadline: None,
        }
    }

    /// Whether the command still runs on its own (not exited, not stopped).
    fn running(&self) -> bool {
        self.ending.exit.is_none() && self.ending.stop.is_none()
    }

    /// The main process exited: records how, and asks to stop the group if
    /// it left anything running.
    fn exited(&mut self, exit: std::io::Result<ExitStatus>) -> Option<RunStop> {
        let (status, failed) = match exit {
            Ok(status) => (status, false),
            Err(err) => {
                // Waiting cannot really fail for our own child; if it does,
                // stop the group so nothing is left running.
                tracing::warn!(pgid = self.pgid, %err, "could not wait for the command");
                (ExitStatus::default(), true)
            }
        };
        self.ending.exit = Some(status);
        let left = failed || !self.targets.members().is_empty();
        (self.ending.stop.is_none() && left).then_some(RunStop::Leftovers)
    }

    /// Starts stopping the group for `stop`, unless it is already stopped.
    fn stop(&mut self, stop: RunStop) {
        if self.ending.stop.is_some() {
            return;
        }
        tracing::debug!(pgid = self.pgid, ?stop, "stopping the command's process group");
        self.ending.stop = Some(stop);
        let (grace, targets) = (self.grace, self.targets.clone());
        self.stopping = Some(Box::pin(async move { process::terminate(&targets, grace).await }));
    }

    /// The stopping of the group is done, as `mode`.
    fn stopped(&mut self, mode: Option<TerminationMode>, child: &mut tokio::process::Child) {
        self.stopping = None;
        self.ending.kill = mode;
        if self.ending.exit.is_none() {
            // The main process left the group it leads, so the group kill
            // missed it; stop it by pid.
            #[allow(
                clippy::disallowed_methods,
                reason = "the child we wait for, by its handle, which knows whether it was reaped"
            )]
            let _ = child.start_kill();
        }
    }

    /// Whether the watch is over: the main process exited, any stopping is
    /// done and both pipes are closed. Once only the pipes are left, they
    /// are read up to [`DRAIN_LIMIT`].
    fn collected(&mut self, streams: &Streams) -> bool {
        if self.ending.exit.is_none() || self.stopping.is_some() {
            return false;
        }
        if streams.closed() {
            return true;
        }
        self.drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_LIMIT);
        false
    }
}

/// Awaits the future in `slot`; never completes when the slot is empty.
async fn finish<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; never completes when there is none.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// `limit` from now, or far in the future for limits too large to add.
fn deadline_after(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// One output pipe, decoded, then through its sink.
struct Stream<R> {
    /// The pipe, until it reaches end of file.
    pipe: Option<R>,
    buffer: Box<[u8]>,
    decoder: Utf8Decoder,
    output: OutputSink,
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(pipe: Option<R>, output: OutputSink) -> Stream<R> {
        Stream { pipe, buffer: vec![0; READ_CHUNK].into(), decoder: Utf8Decoder::default(), output }
    }

    /// Reads the next chunk into the buffer. Never completes once the pipe
    /// is closed, so a `select!` branch on it simply goes quiet. Cancel-safe:
    /// a read that loses the race has taken no bytes.
    async fn read(&mut self) -> std::io::Result<usize> {
        match &mut self.pipe {
            Some(pipe) => pipe.read(&mut self.buffer).await,
            None => std::future::pending().await,
        }
    }

    /// Takes in the result of [`Stream::read`]; returns whether bytes came.
    fn absorb(&mut self, read: std::io::Result<usize>) -> bool {
        match read {
            Ok(0) => {
                self.close();
                false
            }
            Ok(n) => {
                let text = self.decoder.decode(&self.buffer[..n]);
                self.output.push(&text);
                true
            }
            Err(err) => {
                tracing::debug!(%err, "reading command output failed; treating it as ended");
                self.close();
                false
            }
        }
    }

    fn close(&mut self) {
        self.pipe = None;
        self.output.push(&self.decoder.finish());
    }

    fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    fn finish(mut self, exit_code: i32) -> Shown {
        if !self.is_closed() {
            self.close();
        }
        finish_sink(&mut self.output, exit_code)
    }
}

/// Tells the guard about the command's process group while it runs. If the
/// run is dropped before it ends (its task aborted), the group is killed
/// here, since nobody else would stop it.
pub(super) struct GroupWatch {
    pgid: i32,
    /// Everything the run owns: its group, its descendants, its scope.
    targets: Targets,
    guard: Option<Arc<Guard>>,
    finished: bool,
}

impl GroupWatch {
    pub(super) fn new(pgid: i32, targets: Targets, guard: Option<Arc<Guard>>) -> GroupWatch {
        if let Some(guard) = &guard {
            guard.watch_group(pgid);
        }
        GroupWatch { pgid, targets, guard, finished: false }
    }

    /// The run is over and the group has been dealt with.
    pub(super) fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for GroupWatch {
    fn drop(&mut self) {
        if !self.finished {
            tracing::debug!(pgid = self.pgid, "run abandoned; killing what it started");
            process::kill_now(&self.targets);
        }
        if let Some(guard) = &self.guard {
            guard.forget_group(self.pgid);
        }
    }
}
