//! The session's timing decisions, as pure functions of instants, durations
//! and budgets: when a waiting call returns ([`wait_turn`]; early, as
//! running, for a job that reads the terminal but may still be at work,
//! [`unsure_turn`], and for a full-screen program that keeps redrawing,
//! [`screen_turn`]), when the
//! supervisor looks whether the program waits for input and how much of
//! the time between looks is discounted as input wait ([`Look`]: at a
//! prompt, or sitting at the terminal using no CPU, as `ssh` at a remote
//! prompt does), and when a command that runs unwatched is stopped
//! ([`stop_at`]).
//!
//! Nothing here reads a clock, sleeps, locks or touches a process: callers
//! pass `now`, so every rule is unit-tested with made-up instants. The
//! callers (`wait.rs`, `supervise.rs`) do the sleeping and the sampling.

use std::time::Duration;

use tokio::time::Instant;

use super::call::WaitEnded;

/// A command whose output (and our input) has been quiet this long is
/// looked at: is it waiting for input? Short, so that a prompt is answered
/// within about a second; long enough that a program that just got input
/// has woken up to read it.
pub(super) const INPUT_QUIET: Duration = Duration::from_millis(150);
/// Between looks while the command stays quiet: from the first interval,
/// doubling up to the longest while it is not waiting for input.
const INPUT_SAMPLE: Duration = Duration::from_millis(250);
/// After a look finds the program waiting, the look that confirms it. One
/// look is not enough: the shell back at its prompt reads the terminal too,
/// and the output it wrote before (its end marker) may not have been read
/// from the terminal yet when the machine is busy.
const INPUT_CONFIRM: Duration = Duration::from_millis(100);
const INPUT_SAMPLE_MAX: Duration = Duration::from_secs(1);

/// How long a waiting call may wait, from the session's configuration and
/// the call's own `timeout`.
#[derive(Debug, Clone, Copy)]
pub(super) struct WaitBudget {
    /// The call's own wait, if it gave one: silence alone does not end it.
    timeout: Option<Duration>,
    /// Without a timeout, the call returns after this long without output.
    no_output_return: Duration,
    /// Without a timeout, the call returns after this long in any case.
    max_wait: Duration,
}

impl WaitBudget {
    /// A call's wait: its own `timeout`, else until `no_output_return` of
    /// silence or `max_wait` in all.
    pub(super) fn new(
        timeout: Option<Duration>,
        no_output_return: Duration,
        max_wait: Duration,
    ) -> WaitBudget {
        WaitBudget { timeout, no_output_return, max_wait }
    }
}

/// Whether a call that began at `call_start` and waits on a command whose
/// output last changed at `last_output_at` returns at `now` (and why), or
/// else until when it may sleep before deciding again. The command's end
/// and its input wait are events decided elsewhere; this is the clock.
pub(super) fn wait_turn(
    budget: WaitBudget,
    call_start: Instant,
    last_output_at: Instant,
    now: Instant,
) -> Result<Instant, WaitEnded> {
    match budget.timeout {
        // An explicit wait: the agent said how long it is willing to wait,
        // so silence alone does not end it.
        Some(limit) => {
            if now >= call_start + limit {
                return Err(WaitEnded::Timeout(limit));
            }
            Ok(call_start + limit)
        }
        None => {
            let quiet_since = last_output_at.max(call_start);
            if now >= quiet_since + budget.no_output_return {
                return Err(WaitEnded::NoNewOutput(budget.no_output_return));
            }
            if now >= call_start + budget.max_wait {
                return Err(WaitEnded::MaxWait(budget.max_wait));
            }
            Ok((quiet_since + budget.no_output_return).min(call_start + budget.max_wait))
        }
    }
}

/// A job that reads the terminal while something of it may still be at
/// work (a live writer on a pipe it also waits on, a connected socket, a
/// process running or sleeping) is not claimed to wait for input. When it
/// left text on the cursor's line (what may be a question: `password: `),
/// the call hands control back as running after this much quiet; after a
/// finished line it is a command at work, under the call's usual rules.
/// Longer than the pause of a program between two lines, short beside the
/// silence rule.
pub(super) const UNSURE_QUIET: Duration = Duration::from_secs(3);

/// Whether the short-quiet rule ([`unsure_turn`]) applies to a job that
/// reads the terminal but may still be at work (`unsure`). A finished line
/// followed by silence is no question (a build between two steps; apt while
/// dpkg's triggers run): only text left on the cursor's line may be one
/// (`line_text`). Or the job sits at the terminal using no CPU, with
/// nothing local left to produce, and it has news for this call
/// (`idle_menu`): the call sent it input, which it answered, or the call
/// started it and it reads keys (the terminal out of line mode). That is a
/// menu that draws or redraws and waits on the terminal with sockets open
/// (a Node CLI's keep-alive connections); its cursor often sits on a blank
/// line. A poll of a quiet remote build (`ssh host make`) is none of these.
pub(super) fn unsure_applies(unsure: bool, line_text: bool, idle_menu: bool) -> bool {
    unsure && (line_text || idle_menu)
}

/// A full-screen program is given this long after it is first seen in this
/// call to draw its screen.
pub(super) const SCREEN_SETTLE: Duration = Duration::from_secs(1);
/// Output after a pause this long is a redraw; output that has been quiet
/// this long is between two redraws.
pub(super) const SCREEN_GAP: Duration = Duration::from_millis(200);
/// A full-screen program whose screen has been still this long has drawn
/// it: it waits (for input that may go to a reader outside the job, as
/// `tmux`'s server reads the terminal for its client) or works behind it.
pub(super) const SCREEN_QUIET: Duration = Duration::from_millis(1_500);
/// A full-screen program that redraws, but never pauses at the moment the
/// call looks, is handed back this long after it was first seen.
pub(super) const SCREEN_LONGEST: Duration = Duration::from_secs(3);

/// Whether a call that began at `call_start`, on a command whose job
/// reads the terminal but may still be at work and to which the rule
/// applies (`unsure`: [`unsure_applies`]) and whose output (and our
/// input) has been quiet since
/// `quiet_from`, returns at `now` as running, or else until when that rule
/// lets it sleep (`None`: the rule does not apply). Quiet counts from the
/// call's start at the earliest, so a poll always waits that long.
pub(super) fn unsure_turn(
    unsure: bool,
    call_start: Instant,
    quiet_from: Instant,
    now: Instant,
) -> Result<Option<Instant>, WaitEnded> {
    if !unsure {
        return Ok(None);
    }
    let at = quiet_from.max(call_start) + UNSURE_QUIET;
    if now >= at {
        return Err(WaitEnded::NoNewOutput(UNSURE_QUIET));
    }
    Ok(Some(at))
}

/// What a waiting call has seen of a full-screen program (one on the
/// alternate screen): since when, its last output, and whether it drew
/// again after a pause: a program that redraws at its own rhythm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScreenSeen {
    since: Instant,
    last_output_at: Instant,
    redrawn: bool,
}

impl ScreenSeen {
    /// First seen at `now`, its output last changed at `last_output_at`.
    pub(super) fn new(now: Instant, last_output_at: Instant) -> ScreenSeen {
        ScreenSeen { since: now, last_output_at, redrawn: false }
    }

    /// Its output last changed at `last_output_at` (the call sees every
    /// change: output wakes it).
    pub(super) fn observe(&mut self, last_output_at: Instant) {
        if last_output_at >= self.last_output_at + SCREEN_GAP {
            self.redrawn = true;
        }
        self.last_output_at = self.last_output_at.max(last_output_at);
    }
}

/// Whether a call without a `timeout` that began at `call_start` returns at
/// `now` as running because a full-screen program shows its screen (`seen`;
/// `None`: not full-screen). Once it has been seen for [`SCREEN_SETTLE`]:
/// when its screen has been still for [`SCREEN_QUIET`] (drawn, and waiting
/// or working behind it), or, if it redrew after a pause, at a pause
/// between redraws ([`SCREEN_GAP`]); and at [`SCREEN_LONGEST`] whatever it
/// does. `watch` and `tmux` redraw or wait for ever: without this the call
/// would wait for the silence rule or the longest wait. A call with a
/// `timeout` waits it out, as for any output. `Ok(None)`: the rule does
/// not apply.
pub(super) fn screen_turn(
    budget: WaitBudget,
    seen: Option<ScreenSeen>,
    call_start: Instant,
    now: Instant,
) -> Result<Option<Instant>, WaitEnded> {
    let Some(seen) = seen.filter(|_| budget.timeout.is_none()) else { return Ok(None) };
    let since = seen.since.max(call_start);
    let settled = since + SCREEN_SETTLE;
    let still = settled.max(seen.last_output_at + SCREEN_QUIET);
    let mut at = still.min(since + SCREEN_LONGEST);
    if seen.redrawn {
        at = at.min(settled.max(seen.last_output_at + SCREEN_GAP));
    }
    if now >= at {
        return Err(WaitEnded::FullScreen);
    }
    Ok(Some(at))
}

/// Whether a program blocked reading the terminal at the last look waits
/// for the agent: a look confirmed it at `confirmed_at`, after its output
/// (and our input) went quiet at `quiet_from`.
pub(super) fn waits_for_input(
    waiting: bool,
    confirmed_at: Option<Instant>,
    quiet_from: Instant,
) -> bool {
    waiting && confirmed_at.is_some_and(|at| at >= quiet_from + INPUT_QUIET)
}

/// What one look found the foreground job doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Found {
    /// The program was blocked reading the terminal, its output all read.
    pub(super) waiting: bool,
    /// The job sat at the terminal using no CPU since the last look.
    pub(super) idle: bool,
}

/// The supervisor's last look at one command: when to look next, and how
/// much of the time between two looks is discounted as input wait.
#[derive(Debug, Clone)]
pub(super) struct Look {
    seq: u64,
    at: Option<Instant>,
    waiting: bool,
    confirmed: bool,
    /// The job sat at the terminal, using no CPU, from the look before to
    /// the last one, with no output in between.
    idle: bool,
    interval: Duration,
}

impl Look {
    /// No look yet at command `seq`.
    pub(super) fn new(seq: u64) -> Look {
        Look {
            seq,
            at: None,
            waiting: false,
            confirmed: false,
            idle: false,
            interval: INPUT_SAMPLE,
        }
    }

    /// The job sat at the terminal without using CPU between the last two
    /// looks (`ssh` at a remote prompt): not a hang, whatever its reply.
    pub(super) fn idle(&self) -> bool {
        self.idle
    }

    /// The command this look is about.
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// The program was blocked reading the terminal at the last look.
    pub(super) fn waiting(&self) -> bool {
        self.waiting
    }

    /// Two looks in a row, with no output in between, found it waiting.
    pub(super) fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// When to look next: soon after the output goes quiet at
    /// `quiet_from`, then at a growing interval while nothing changes.
    pub(super) fn due(&self, quiet_from: Instant) -> Instant {
        let after_quiet = quiet_from + INPUT_QUIET;
        match self.at {
            Some(at) if at >= after_quiet && self.waiting && !self.confirmed => at + INPUT_CONFIRM,
            Some(at) if at >= after_quiet => at + self.interval,
            _ => after_quiet,
        }
    }

    /// Records a look at `now` that found what `found` says, for output
    /// quiet since `quiet_from`. Returns the input wait it discounts: the
    /// time since the last look when both found the program waiting, or
    /// when the job sat idle at the terminal all along (no output or input
    /// since the last look), else nothing.
    pub(super) fn observe(&mut self, now: Instant, found: Found, quiet_from: Instant) -> Duration {
        let Found { waiting, idle } = found;
        // Output (or input) since the last look makes this look a first one.
        let fresh = self.at.is_none_or(|at| at < quiet_from + INPUT_QUIET);
        self.idle = idle && !fresh;
        let accrued = match self.at {
            Some(at) if (self.waiting && waiting) || self.idle => now.saturating_duration_since(at),
            _ => Duration::ZERO,
        };
        self.confirmed = waiting && self.waiting && !fresh;
        self.interval =
            if waiting || fresh { INPUT_SAMPLE } else { (self.interval * 2).min(INPUT_SAMPLE_MAX) };
        self.at = Some(now);
        self.waiting = waiting;
        accrued
    }
}

/// When a command that runs under `limit` is stopped: once it has run
/// unwatched (no call waiting on it: `watchers` is 0) for `limit` since
/// `unwatched_since`, not counting `input_wait`, the time it spent waiting
/// for input in that stretch. `None` while it is watched or has no limit.
pub(super) fn stop_at(
    limit: Option<Duration>,
    watchers: u32,
    unwatched_since: Instant,
    input_wait: Duration,
) -> Option<Instant> {
    match limit {
        Some(limit) if watchers == 0 => Some(unwatched_since + limit + input_wait),
        _ => None,
    }
}

/// Whether the supervisor stops the command at `now`: its stop time has
/// come and the program is not waiting for input at the last look (time at
/// a prompt is never what runs a command out of its limit).
pub(super) fn stops_now(stop_at: Option<Instant>, now: Instant, waiting: bool) -> bool {
    stop_at.is_some_and(|at| now >= at) && !waiting
}

/// The limit in force after a call with `timeout` looks at a command whose
/// category allows `exec_limit`: the larger of the two (none without a
/// category limit).
pub(super) fn unwatched_limit(
    exec_limit: Option<Duration>,
    timeout: Option<Duration>,
) -> Option<Duration> {
    exec_limit.map(|limit| limit.max(timeout.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A look that found the program neither waiting nor idle.
    const NOTHING: Found = Found { waiting: false, idle: false };
    /// A look that found the program waiting for input.
    const WAITING: Found = Found { waiting: true, idle: false };
    /// A look that found the job idle at the terminal.
    const IDLE: Found = Found { waiting: false, idle: true };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const BUDGET: WaitBudget = WaitBudget {
        timeout: None,
        no_output_return: Duration::from_secs(30),
        max_wait: Duration::from_secs(50),
    };

    #[test]
    fn a_call_with_a_timeout_waits_it_out_whatever_the_output() {
        let t0 = Instant::now();
        let budget = WaitBudget { timeout: Some(ms(2_000)), ..BUDGET };
        // Silent for longer than the soft return: still waits.
        assert_eq!(wait_turn(budget, t0, t0, t0 + ms(1_999)), Ok(t0 + ms(2_000)));
        assert_eq!(wait_turn(budget, t0, t0, t0 + ms(2_000)), Err(WaitEnded::Timeout(ms(2_000))));
        let zero = WaitBudget { timeout: Some(Duration::ZERO), ..BUDGET };
        assert_eq!(wait_turn(zero, t0, t0, t0), Err(WaitEnded::Timeout(Duration::ZERO)));
    }

    #[test]
    fn a_call_without_a_timeout_returns_on_silence_or_at_the_longest_wait() {
        let t0 = Instant::now();
        let quiet = WaitBudget { no_output_return: ms(300), ..BUDGET };
        // Quiet counts from the call's start or the last output, the later.
        assert_eq!(wait_turn(quiet, t0, t0 - ms(10_000), t0 + ms(100)), Ok(t0 + ms(300)));
        assert_eq!(wait_turn(quiet, t0, t0 + ms(200), t0 + ms(400)), Ok(t0 + ms(500)));
        assert_eq!(
            wait_turn(quiet, t0, t0 + ms(200), t0 + ms(500)),
            Err(WaitEnded::NoNewOutput(ms(300)))
        );
        // Output that never stops: the longest wait ends it.
        let busy = WaitBudget { no_output_return: ms(300), max_wait: ms(1_000), ..BUDGET };
        assert_eq!(wait_turn(busy, t0, t0 + ms(900), t0 + ms(950)), Ok(t0 + ms(1_000)));
        assert_eq!(
            wait_turn(busy, t0, t0 + ms(990), t0 + ms(1_000)),
            Err(WaitEnded::MaxWait(ms(1_000)))
        );
    }

    #[test]
    fn a_job_that_may_still_be_at_work_is_handed_back_after_a_short_quiet() {
        let t0 = Instant::now();
        // Not unsure: the rule does not apply.
        assert_eq!(unsure_turn(false, t0, t0, t0 + ms(60_000)), Ok(None));
        // Quiet counts from the last output...
        let quiet = t0 + ms(500);
        assert_eq!(unsure_turn(true, t0, quiet, t0 + ms(1_000)), Ok(Some(quiet + UNSURE_QUIET)));
        assert_eq!(
            unsure_turn(true, t0, quiet, quiet + UNSURE_QUIET),
            Err(WaitEnded::NoNewOutput(UNSURE_QUIET))
        );
        // ...or from the call's start: a poll of a long-quiet job waits too.
        let poll = t0 + ms(60_000);
        assert_eq!(unsure_turn(true, poll, t0, poll), Ok(Some(poll + UNSURE_QUIET)));
        assert!(unsure_turn(true, poll, t0, poll + UNSURE_QUIET - ms(1)).is_ok());
        // Output that keeps coming keeps the call waiting.
        let chatty = |n: u64| unsure_turn(true, t0, t0 + ms(n * 500), t0 + ms(n * 500 + 100));
        assert!((0..100).all(|n| chatty(n).is_ok()));
    }

    #[test]
    fn a_full_screen_program_is_handed_back_once_drawn() {
        let t0 = Instant::now();
        let turn = |seen: ScreenSeen, now: Instant| screen_turn(BUDGET, Some(seen), t0, now);
        // Not full-screen: the rule does not apply.
        assert_eq!(screen_turn(BUDGET, None, t0, t0 + ms(10_000)), Ok(None));
        // Drawn once, then still (`tmux`, whose server reads the terminal):
        // back once the screen has been still long enough.
        let mut seen = ScreenSeen::new(t0, t0);
        seen.observe(t0 + ms(50));
        assert_eq!(turn(seen, t0 + ms(1_000)), Ok(Some(t0 + ms(50) + SCREEN_QUIET)));
        assert_eq!(turn(seen, t0 + ms(50) + SCREEN_QUIET), Err(WaitEnded::FullScreen));
        // `watch -n 0.5`: a redraw after a pause; back at the first pause
        // after the settling time.
        seen.observe(t0 + ms(500));
        assert_eq!(turn(seen, t0 + ms(600)), Ok(Some(t0 + SCREEN_SETTLE)));
        seen.observe(t0 + ms(1_000));
        assert_eq!(turn(seen, t0 + ms(1_000)), Ok(Some(t0 + ms(1_000) + SCREEN_GAP)));
        assert_eq!(turn(seen, t0 + ms(1_000) + SCREEN_GAP), Err(WaitEnded::FullScreen));
        // A call with a timeout waits it out.
        let timed = WaitBudget { timeout: Some(ms(20_000)), ..BUDGET };
        assert_eq!(screen_turn(timed, Some(seen), t0, t0 + ms(10_000)), Ok(None));
        // Redrawn without a pause: handed back at the longest.
        let mut busy = ScreenSeen::new(t0, t0);
        for n in 1..150 {
            busy.observe(t0 + ms(n * 20));
            let due = turn(busy, t0 + ms(n * 20));
            assert_eq!(due, Ok(Some((t0 + ms(n * 20) + SCREEN_QUIET).min(t0 + SCREEN_LONGEST))));
        }
        assert_eq!(turn(busy, t0 + SCREEN_LONGEST), Err(WaitEnded::FullScreen));
        // A poll of a screen shown before the call: its own settling time.
        let poll = t0 + ms(60_000);
        let polled = ScreenSeen::new(poll, poll - ms(5_000));
        assert_eq!(screen_turn(BUDGET, Some(polled), poll, poll), Ok(Some(poll + SCREEN_SETTLE)));
    }

    #[test]
    fn the_supervisor_looks_soon_after_quiet_confirms_then_backs_off() {
        let t0 = Instant::now();
        let mut look = Look::new(1);
        assert_eq!(look.due(t0), t0 + INPUT_QUIET);
        // Not waiting: the interval doubles up to its longest.
        let mut at = t0 + INPUT_QUIET;
        let mut intervals = Vec::new();
        for _ in 0..5 {
            look.observe(at, NOTHING, t0);
            let next = look.due(t0);
            intervals.push(next - at);
            at = next;
        }
        assert_eq!(intervals, vec![ms(250), ms(500), ms(1_000), ms(1_000), ms(1_000)]);
        // Waiting once: a quick second look confirms it.
        look.observe(at, WAITING, t0);
        assert!(look.waiting() && !look.confirmed());
        assert_eq!(look.due(t0), at + INPUT_CONFIRM);
        look.observe(at + INPUT_CONFIRM, WAITING, t0);
        assert!(look.confirmed());
        assert_eq!(look.due(t0), at + INPUT_CONFIRM + INPUT_SAMPLE);
        // New output starts over: soon after it goes quiet again.
        let later = at + ms(5_000);
        assert_eq!(look.due(later), later + INPUT_QUIET);
        look.observe(later + INPUT_QUIET, WAITING, later);
        assert!(!look.confirmed(), "output since the last look: not a confirmation");
    }

    #[test]
    fn only_time_between_two_waiting_looks_is_discounted() {
        let t0 = Instant::now();
        let mut look = Look::new(1);
        assert_eq!(look.observe(t0 + ms(150), WAITING, t0), Duration::ZERO, "first look");
        assert_eq!(look.observe(t0 + ms(250), WAITING, t0), ms(100));
        assert_eq!(look.observe(t0 + ms(500), WAITING, t0), ms(250));
        assert_eq!(look.observe(t0 + ms(750), NOTHING, t0), Duration::ZERO, "stopped waiting");
        assert_eq!(look.observe(t0 + ms(1_000), WAITING, t0), Duration::ZERO, "waiting again");
        assert_eq!(look.observe(t0 + ms(1_100), WAITING, t0), ms(100));
    }

    #[test]
    fn time_idle_at_the_terminal_is_discounted_but_not_across_output() {
        let t0 = Instant::now();
        let mut look = Look::new(1);
        assert_eq!(look.observe(t0 + ms(150), IDLE, t0), Duration::ZERO, "first look");
        assert!(!look.idle());
        assert_eq!(look.observe(t0 + ms(400), IDLE, t0), ms(250));
        assert!(look.idle() && !look.waiting());
        assert_eq!(look.observe(t0 + ms(1_400), IDLE, t0), ms(1_000));
        // CPU used, or a process at work: nothing, and no longer idle.
        assert_eq!(look.observe(t0 + ms(2_400), NOTHING, t0), Duration::ZERO);
        assert!(!look.idle());
        // Output since the last look: the interval is not idle.
        let output = t0 + ms(3_000);
        assert_eq!(look.observe(output + ms(150), IDLE, output), Duration::ZERO);
        assert!(!look.idle());
        assert_eq!(look.observe(output + ms(400), IDLE, output), ms(250));
        // An idle job is not stopped at its stop time.
        let at = stop_at(Some(ms(1_000)), 0, t0, Duration::ZERO);
        assert!(!stops_now(at, t0 + ms(5_000), look.waiting() || look.idle()));
    }

    #[test]
    fn the_short_quiet_rule_needs_a_question_or_an_answered_idle_job() {
        assert!(!unsure_applies(false, true, true), "a sure prompt or no reader");
        assert!(unsure_applies(true, true, false), "text left on the cursor's line");
        assert!(unsure_applies(true, false, true), "a menu that answered a key");
        assert!(!unsure_applies(true, false, false), "a build after a finished line");
    }

    #[test]
    fn input_wait_counts_only_once_confirmed_after_quiet() {
        let t0 = Instant::now();
        assert!(!waits_for_input(true, None, t0));
        assert!(!waits_for_input(false, Some(t0 + ms(500)), t0));
        assert!(!waits_for_input(true, Some(t0 + ms(100)), t0), "before the quiet time");
        assert!(waits_for_input(true, Some(t0 + INPUT_QUIET), t0));
    }

    #[test]
    fn an_unwatched_command_stops_at_its_limit_plus_its_input_wait() {
        let t0 = Instant::now();
        let limit = Some(ms(1_000));
        // Watched: never.
        assert_eq!(stop_at(limit, 1, t0, Duration::ZERO), None);
        assert_eq!(stop_at(None, 0, t0, Duration::ZERO), None);
        let at = stop_at(limit, 0, t0, Duration::ZERO);
        assert_eq!(at, Some(t0 + ms(1_000)));
        assert!(!stops_now(at, t0 + ms(999), false));
        assert!(stops_now(at, t0 + ms(1_000), false));
        // At a prompt at the last look: not now.
        assert!(!stops_now(at, t0 + ms(5_000), true));
        // 2.5 s spent waiting for input move the stop by as much.
        let at = stop_at(limit, 0, t0, ms(2_500));
        assert!(!stops_now(at, t0 + ms(3_499), false));
        assert!(stops_now(at, t0 + ms(3_500), false));
    }

    #[test]
    fn the_last_calls_timeout_raises_the_limit_never_lowers_it() {
        assert_eq!(unwatched_limit(Some(ms(500)), Some(ms(1_000))), Some(ms(1_000)));
        assert_eq!(unwatched_limit(Some(ms(500)), Some(ms(100))), Some(ms(500)));
        assert_eq!(unwatched_limit(Some(ms(500)), None), Some(ms(500)));
        assert_eq!(unwatched_limit(None, Some(ms(1_000))), None);
        // Unwatched for 700 ms after a call with a 1 s timeout: not stopped.
        let t0 = Instant::now();
        let at = stop_at(unwatched_limit(Some(ms(500)), Some(ms(1_000))), 0, t0, Duration::ZERO);
        assert!(!stops_now(at, t0 + ms(700), false));
        assert!(stops_now(at, t0 + ms(1_000), false));
    }
}
