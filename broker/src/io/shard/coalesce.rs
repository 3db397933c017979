//! The coalescing of a core's writes: whether a turn's writes wait for more verification
//! results (`server.write_coalesce_us`), and the end of a turn's writes with the timing of
//! the turn, the wait and the flush (`metrics::Stage`).
//!
//! Owns: the decision (`writes_wait`, a pure function of what the core knows, so it is
//! tested without I/O) and how long the writes may still wait.
//! Never does: write a byte itself (the link flushes), or decide what a turn takes.

use std::time::{Duration, Instant};

use super::Shard;
use crate::metrics::Stage;

/// What the decision to let a turn's writes wait looks at.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WriteState {
    /// `server.write_coalesce_us` (0: never wait).
    pub(super) wait_us: u64,
    /// What is left of the fan-out budget until the next flush.
    pub(super) budget_left: usize,
    /// Verification jobs in flight: the results that may still come.
    pub(super) in_flight: usize,
    /// The turn stopped at `DELIVERIES_PER_TURN_MAX` with results left.
    pub(super) cut_short: bool,
    /// The core drains.
    pub(super) draining: bool,
    /// The writes are waiting already.
    pub(super) waiting: bool,
    /// The wait under way reached `server.write_coalesce_us`.
    pub(super) wait_over: bool,
    /// Results this turn applied.
    pub(super) applied: usize,
}

/// Whether a turn's writes wait for more results. They may while enough verifications are in
/// flight to fill what is left of the budget (or the turn was cut short with results left),
/// until the budget is spent, the core drains or the wait is over; a wait starts only in a
/// turn that applied results. The results in flight are the evidence that a wait pays:
/// after a flush the whole budget is left, so a wait starts only with a budget's worth of
/// results on their way (32 at the default R26 bound), which a moderate load never has
/// (issue 23: at 1 000 and 2 000 publications/s to N = 100 no flush waited).
pub(super) fn writes_wait(state: &WriteState) -> bool {
    let may_wait = state.wait_us > 0
        && state.budget_left > 0
        && (state.in_flight >= state.budget_left || state.cut_short)
        && !state.draining
        && !state.wait_over;
    if !may_wait {
        return false;
    }
    state.waiting || state.applied > 0
}

fn micros_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
}

impl Shard {
    /// The end of a turn's writes: they wait (`writes_wait`) or are flushed now; a turn that
    /// queued fan-outs is timed (`Stage::Turn`), and so are the wait and the flush of
    /// fan-outs. `at` is the turn's start.
    pub(super) fn end_writes(&self, at: Instant, applied: usize, fanouts: usize) {
        let stages = &self.link.metrics().stage_latency_us;
        let worked = (fanouts > 0).then(Instant::now);
        if let Some(end) = worked {
            stages.record(Stage::Turn, micros_between(at, end));
        }
        if self.coalesce(applied) {
            return;
        }
        let waited_since = self.coalescing_since.take();
        let unflushed = self.unflushed_fanouts.replace(0);
        if unflushed == 0 {
            self.link.flush_touched();
            return;
        }
        let start = worked.unwrap_or_else(Instant::now);
        self.link.flush_touched();
        let waited = waited_since.map_or(0, |since| micros_between(since, start));
        stages.record(Stage::CoalesceWait, waited);
        stages.record(Stage::Flush, micros_between(start, Instant::now()));
    }

    /// Whether this turn's writes wait for more results (`writes_wait`), starting the wait's
    /// clock when it begins.
    fn coalesce(&self, applied: usize) -> bool {
        let state = WriteState {
            wait_us: self.link.settings().write_coalesce_us,
            budget_left: self.fanout_budget_left(),
            in_flight: self.verifications.get(),
            cut_short: self.cut_short(),
            draining: self.link.draining(),
            waiting: self.coalescing_since.get().is_some(),
            wait_over: self.coalesce_left() == Some(Duration::ZERO),
            applied,
        };
        let waits = writes_wait(&state);
        if waits && !state.waiting {
            self.coalescing_since.set(Some(Instant::now()));
        }
        waits
    }

    /// Whether this turn stopped at `DELIVERIES_PER_TURN_MAX` with results left: the next
    /// turn applies them as soon as the other tasks ran, so the writes wait for them too (a
    /// flush at every cut would split a large cohort's writes into a few frames each).
    fn cut_short(&self) -> bool {
        self.turn_deliveries.get() >= super::DELIVERIES_PER_TURN_MAX
            && !self.results.borrow().is_empty()
    }

    /// How long the writes may still wait, while they wait.
    pub(super) fn coalesce_left(&self) -> Option<Duration> {
        let since = self.coalescing_since.get()?;
        let wait = Duration::from_micros(self.link.settings().write_coalesce_us);
        Some(wait.saturating_sub(since.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::{WriteState, writes_wait};

    /// A core under load: more results in flight than the budget left, and this turn applied
    /// some.
    fn loaded() -> WriteState {
        WriteState {
            wait_us: 1000,
            budget_left: 32,
            in_flight: 40,
            cut_short: false,
            draining: false,
            waiting: false,
            wait_over: false,
            applied: 2,
        }
    }

    #[test]
    fn writes_wait_under_load_and_keep_waiting_until_the_wait_is_over() {
        assert!(writes_wait(&loaded()));
        let waiting = WriteState {
            waiting: true,
            applied: 0,
            ..loaded()
        };
        assert!(writes_wait(&waiting), "a wait under way goes on");
        assert!(!writes_wait(&WriteState {
            wait_over: true,
            ..waiting
        }));
    }

    #[test]
    fn writes_never_wait_where_it_buys_nothing() {
        let moderate = WriteState {
            in_flight: 3,
            ..loaded()
        };
        assert!(
            !writes_wait(&moderate),
            "too few results may come to fill a write"
        );
        let just_short = WriteState {
            in_flight: 31,
            ..loaded()
        };
        assert!(
            !writes_wait(&just_short),
            "a budget's worth must be on its way"
        );
        assert!(!writes_wait(&WriteState {
            applied: 0,
            ..loaded()
        }));
        assert!(!writes_wait(&WriteState {
            wait_us: 0,
            ..loaded()
        }));
        assert!(!writes_wait(&WriteState {
            budget_left: 0,
            ..loaded()
        }));
        assert!(!writes_wait(&WriteState {
            draining: true,
            ..loaded()
        }));
    }

    #[test]
    fn a_turn_cut_short_waits_for_its_own_rest_whatever_is_in_flight() {
        let cut = WriteState {
            cut_short: true,
            in_flight: 0,
            ..loaded()
        };
        assert!(writes_wait(&cut));
    }
}
